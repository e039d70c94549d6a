package cron

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func code(err error) core.Code {
	var e *core.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestAct: the actions the CLI, /cron and the agent's tool share.
func TestAct(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.Local)
	j, err := Add(ctx, st, store.CronJob{Schedule: "every 1h", Text: "Stretch your legs now please, really"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if j.Name != "Stretch your legs now please, really" || j.ChatID != core.DefaultChatID || State(j) != "on" {
		t.Fatalf("added %+v", j)
	}
	if !strings.HasPrefix(Line(j), j.ID+`  "Stretch your legs now please, really"  [every 1h]  in default  on, next 2026-11-30 11:00`) {
		t.Fatalf("line %q", Line(j))
	}

	p, err := Act(ctx, st, ActPause, j.ID, now)
	if err != nil || p.Enabled || State(p) != "paused" {
		t.Fatalf("pause: %+v %v", p, err)
	}
	later := now.Add(3 * time.Hour)
	r, err := Act(ctx, st, ActResume, j.ID, later)
	if err != nil || !r.Enabled || !r.NextRun.Equal(later.Add(time.Hour)) {
		t.Fatalf("resume: %+v %v", r, err)
	}
	n, err := Act(ctx, st, ActRun, j.ID, later)
	if err != nil || !n.NextRun.Equal(later) {
		t.Fatalf("run: %+v %v", n, err)
	}
	if got, _ := st.CronJob(ctx, j.ID); !got.NextRun.Equal(later) {
		t.Fatalf("stored after run: %+v", got)
	}
	if _, err := Act(ctx, st, "remove", j.ID, later); err != nil {
		t.Fatalf("remove: %v", err)
	}
	for _, a := range []string{ActPause, ActResume, ActRemove, ActRun} {
		if _, err := Act(ctx, st, a, j.ID, later); code(err) != core.CodeNotFound || !strings.Contains(err.Error(), "no cron job") {
			t.Errorf("%s of a removed job: %v", a, err)
		}
	}
	if _, err := Act(ctx, st, "explode", j.ID, later); code(err) != core.CodeUnsupported {
		t.Errorf("unknown action: %v", err)
	}

	// A finished one-shot is done; resuming one whose time has passed
	// says why it cannot.
	once, _ := Add(ctx, st, store.CronJob{Schedule: "2026-12-01T09:00", Text: "once"}, now)
	once.Enabled, once.NextRun = false, time.Time{}
	st.PutCronJob(ctx, once)
	if State(once) != "done" {
		t.Fatalf("state %q", State(once))
	}
	if _, err := Act(ctx, st, ActResume, once.ID, time.Date(2027, 1, 1, 0, 0, 0, 0, time.Local)); err == nil || !strings.Contains(err.Error(), "in the past") {
		t.Fatalf("resuming a past one-shot: %v", err)
	}
}

// TestAddTarget: jobs aim at lanes that exist; a channel may be named by
// its name, and a thread's id stands for that thread of its channel.
func TestAddTarget(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	now := time.Now()
	err := st.Write(ctx, func(tx store.Tx) error {
		if err := tx.PutChannel(core.Channel{ChatID: "c_ops", Name: "Ops", Kind: core.KindChannel}); err != nil {
			return err
		}
		if err := tx.PutChannel(core.Channel{ChatID: "t_1", Name: "deploys", Kind: core.KindThread, ParentChatID: "c_ops"}); err != nil {
			return err
		}
		if err := tx.PutChannel(core.Channel{ChatID: "c_a", Name: "twin", Kind: core.KindChannel}); err != nil {
			return err
		}
		return tx.PutChannel(core.Channel{ChatID: "c_b", Name: "Twin", Kind: core.KindChannel})
	})
	if err != nil {
		t.Fatal(err)
	}
	add := func(chat, thread string) (store.CronJob, error) {
		return Add(ctx, st, store.CronJob{Schedule: "every 1h", Text: "x", ChatID: chat, ThreadID: thread}, now)
	}
	for _, tc := range []struct{ chat, thread, wantChat, wantThread string }{
		{"c_ops", "", "c_ops", ""},
		{"ops", "", "c_ops", ""},
		{"c_ops", "t_1", "c_ops", "t_1"},
		{"t_1", "", "c_ops", "t_1"},
		{"deploys", "", "c_ops", "t_1"},
	} {
		j, err := add(tc.chat, tc.thread)
		if err != nil || j.ChatID != tc.wantChat || j.ThreadID != tc.wantThread {
			t.Errorf("add(%q, %q) = %s/%s, %v", tc.chat, tc.thread, j.ChatID, j.ThreadID, err)
		}
	}
	for _, tc := range []struct{ chat, thread, want string }{
		{"c_nope", "", `unknown channel "c_nope"`},
		{"c_ops", "t_nope", `unknown thread "t_nope" in channel "c_ops"`},
		{"default", "t_1", `unknown thread "t_1" in channel "default"`},
		{"t_1", "t_2", `"t_1" is a thread, not a channel`},
		{"twin", "", `2 channels are called "twin"`},
	} {
		if _, err := add(tc.chat, tc.thread); code(err) != core.CodeNotFound || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("add(%q, %q): %v, want not_found %q", tc.chat, tc.thread, err, tc.want)
		}
	}
}
