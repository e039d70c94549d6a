package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"strings"
	"time"

	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/store"
)

// ops are the admin operations on a store: what the admin socket's
// handler runs inside the gateway, and what Client runs itself when no
// gateway is running. revoke, when set, closes a revoked token's live
// connections and says how many there were.
type ops struct {
	st     Store
	revoke func(tokenID string) int
}

func (o ops) createToken(ctx context.Context, name, deviceID string) (NewToken, error) {
	deviceID = strings.TrimSpace(deviceID)
	if err := gateway.ValidBinding(deviceID); err != nil {
		return NewToken{}, err
	}
	v, t, err := gateway.CreateToken(ctx, o.st, strings.TrimSpace(name), deviceID)
	if err != nil {
		return NewToken{}, err
	}
	return NewToken{Token: tokenOf(t), Value: v}, nil
}

func (o ops) tokens(ctx context.Context) ([]Token, error) {
	toks, err := o.st.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Token, len(toks))
	for i, t := range toks {
		out[i] = tokenOf(t)
	}
	return out, nil
}

// revokeToken revokes a token named by its id (tok_…) or by its value
// (what token create printed), and closes its live connections.
func (o ops) revokeToken(ctx context.Context, ref string) (Revoked, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Revoked{}, ErrNoTokenRef.New()
	}
	toks, err := o.st.Tokens(ctx)
	if err != nil {
		return Revoked{}, err
	}
	var found *store.Token
	h := sha256.Sum256([]byte(ref))
	for i := range toks {
		if toks[i].ID == ref || subtle.ConstantTimeCompare(h[:], toks[i].Hash) == 1 {
			found = &toks[i]
		}
	}
	if found == nil {
		if strings.HasPrefix(ref, "tok_") {
			return Revoked{}, ErrUnknownToken.New(ref)
		}
		return Revoked{}, ErrTokenValue.New()
	}
	if err := o.st.RevokeToken(ctx, found.ID); errors.Is(err, store.ErrNotFound) {
		return Revoked{}, ErrTokenGone.New(found.ID)
	} else if err != nil {
		return Revoked{}, err
	}
	r := Revoked{Token: tokenOf(*found)}
	if o.revoke != nil {
		r.Closed = o.revoke(found.ID)
	}
	return r, nil
}

func (o ops) channels(ctx context.Context) ([]Channel, error) {
	chs, err := o.st.Channels(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Channel, len(chs))
	for i, c := range chs {
		out[i] = channelOf(c)
	}
	return out, nil
}

func (o ops) cronAdd(ctx context.Context, s JobSpec) (Job, error) {
	j, err := cron.Add(ctx, o.st, store.CronJob{Name: s.Name, Schedule: s.Schedule, Prompt: s.Prompt, Text: s.Text,
		ChatID: s.ChatID, ThreadID: s.ThreadID}, time.Now())
	if err != nil {
		return Job{}, err
	}
	return jobOf(j), nil
}

func (o ops) cronList(ctx context.Context) ([]Job, error) {
	jobs, err := o.st.CronJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		out[i] = jobOf(j)
	}
	return out, nil
}

func (o ops) cronAct(ctx context.Context, action, id string) (Job, error) {
	j, err := cron.Act(ctx, o.st, action, id, time.Now())
	if err != nil {
		return Job{}, err
	}
	return jobOf(j), nil
}

func jobOf(j store.CronJob) Job {
	out := Job{ID: j.ID, Name: j.Name, Schedule: j.Schedule, Prompt: j.Prompt, Text: j.Text, ChatID: j.ChatID, ThreadID: j.ThreadID,
		State: cron.State(j), LastRun: j.LastRun, LastErr: j.LastErr}
	if j.Enabled {
		out.NextRun = j.NextRun // a paused job keeps its old next run in the store; it will not run then
	}
	return out
}
