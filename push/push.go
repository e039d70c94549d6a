// Package push wakes devices that are away: FCM (HTTP v1), ntfy and Web
// Push (VAPID). Pushes go through a durable queue in the store, so a
// failing backend is retried with backoff across restarts and never delays
// live delivery; pushes to one device are collapsed per lane.
package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/irisgate/irisgate/store"
)

// ErrGone is what a backend returns when the device's registration no
// longer exists (FCM UNREGISTERED, HTTP 404/410): it is dropped.
var ErrGone = errors.New("push: registration gone")

// ErrRefused is what a backend returns when the service refused a message
// for good: it is not retried, and the registration is kept.
var ErrRefused = errors.New("push: message refused")

// Note is what a push says.
type Note struct {
	Title    string
	Body     string
	ChatID   string
	ThreadID string
	Cursor   int64
	Kind     string // message | cron | notification | picker
	// Collapse groups pushes that replace each other (one per lane).
	Collapse string
}

// Backend sends a note to one registration.
type Backend interface {
	Name() string // fcm | ntfy | webpush
	// Address picks the registration this backend uses ("" when the
	// device has none for it).
	Address(store.Device) string
	Send(ctx context.Context, address string, n Note) error
}

// Content modes: what a push reveals.
const (
	ContentFull    = "full"
	ContentPreview = "preview"
	ContentIDs     = "ids"
)

// Config configures the pusher.
type Config struct {
	Backends []Backend
	Content  string // full | preview | ids
	// Now is the clock (tests inject one).
	Now func() time.Time
	// Online, when set, reports whether a device has a live connection.
	// Only devices that are away are woken: a push still queued (one being
	// retried, say) for a device that came back is dropped, since the
	// device has the frames live or from sync, and its last_pushed_cursor
	// must not claim a notification it never needed.
	Online func(deviceID string) bool
}

// Pusher queues and sends pushes.
type Pusher struct {
	cfg  Config
	st   *store.Store
	log  *slog.Logger
	wake chan struct{}
}

// New makes a pusher; Run sends.
func New(st *store.Store, log *slog.Logger, cfg Config) *Pusher {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Content == "" {
		cfg.Content = ContentPreview
	}
	return &Pusher{cfg: cfg, st: st, log: log, wake: make(chan struct{}, 1)}
}

// Enabled reports whether any backend is configured.
func (p *Pusher) Enabled() bool { return p != nil && len(p.cfg.Backends) > 0 }

// Kind names the first configured backend for hello.ack ("none" without).
func (p *Pusher) Kind() string {
	if !p.Enabled() {
		return "none"
	}
	for _, b := range p.cfg.Backends {
		if b.Name() == "fcm" || b.Name() == "ntfy" {
			return b.Name()
		}
	}
	return "none"
}

// Enqueue queues a note for a device, replacing one still pending for the
// same lane: the device gets one notification, updated, not ten.
func (p *Pusher) Enqueue(ctx context.Context, deviceID string, n Note) error {
	n = p.redact(n)
	err := p.st.EnqueuePush(ctx, store.PushJob{
		DeviceID: deviceID, Collapse: n.Collapse, Cursor: n.Cursor,
		Title: n.Title, Body: n.Body, ChatID: n.ChatID, ThreadID: n.ThreadID, Kind: n.Kind,
		NextAt: p.cfg.Now(),
	})
	if err == nil {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	return err
}

// redact applies the content mode.
func (p *Pusher) redact(n Note) Note {
	switch p.cfg.Content {
	case ContentIDs:
		n.Title, n.Body = "irisgate", "New activity"
	case ContentPreview:
		n.Body = cut(n.Body, 100)
	default:
		n.Body = cut(n.Body, 3000)
	}
	return n
}

func cut(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	c := n
	for c > 0 && !utf8.RuneStart(s[c]) {
		c--
	}
	return s[:c] + "…"
}

// Run sends due pushes until ctx ends, waking on Enqueue and every second.
func (p *Pusher) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		p.SendDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.wake:
		}
	}
}

// maxAttempts bounds retries of one push (about a day with the backoff).
const maxAttempts = 12

// SendDue sends every push whose time has come; tests call it directly.
func (p *Pusher) SendDue(ctx context.Context) {
	jobs, err := p.st.DuePushes(ctx, p.cfg.Now(), 100)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("push queue", "err", err)
		}
		return
	}
	for _, j := range jobs {
		p.send(ctx, j)
	}
}

func (p *Pusher) send(ctx context.Context, j store.PushJob) {
	if p.cfg.Online != nil && p.cfg.Online(j.DeviceID) {
		p.st.DonePush(ctx, j.ID)
		return
	}
	dev, err := p.st.Device(ctx, j.DeviceID)
	if err != nil {
		return
	}
	n := Note{Title: j.Title, Body: j.Body, ChatID: j.ChatID, ThreadID: j.ThreadID, Cursor: j.Cursor, Kind: j.Kind, Collapse: j.Collapse}
	var failures []string
	sent := false
	for _, b := range p.cfg.Backends {
		addr := b.Address(dev)
		if addr == "" {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := b.Send(sctx, addr, n)
		cancel()
		switch {
		case err == nil:
			sent = true
		case errors.Is(err, ErrGone):
			p.log.Info("push registration gone, dropped", "device", j.DeviceID, "backend", b.Name())
			p.st.DropPushRegistration(ctx, j.DeviceID, b.Name())
		case errors.Is(err, ErrRefused):
			p.log.Warn("push refused, not retried", "device", j.DeviceID, "backend", b.Name(), "err", err)
		default:
			failures = append(failures, b.Name()+": "+err.Error())
		}
	}
	if sent || len(failures) == 0 {
		if sent {
			p.st.SetLastPushed(ctx, j.DeviceID, j.Cursor)
		}
		p.st.DonePush(ctx, j.ID)
		return
	}
	if j.Attempts+1 >= maxAttempts {
		p.log.Warn("push given up", "device", j.DeviceID, "attempts", j.Attempts+1, "err", strings.Join(failures, "; "))
		p.st.DonePush(ctx, j.ID)
		return
	}
	backoff := time.Duration(1<<min(j.Attempts, 12)) * 5 * time.Second
	p.st.RetryPush(ctx, j.ID, p.cfg.Now().Add(min(backoff, time.Hour)), strings.Join(failures, "; "))
}

// httpError describes a failed push request.
func httpError(backend string, status int, body string) error {
	return fmt.Errorf("%s answered HTTP %d: %s", backend, status, cut(body, 200))
}

// answer reads a push service's HTTP answer: 2xx is sent, 404/410 means
// the registration is gone, anything else is an error to retry.
func answer(backend string, res *http.Response) error {
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 16<<10))
	switch {
	case res.StatusCode/100 == 2:
		return nil
	case res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusGone:
		return ErrGone
	}
	return httpError(backend, res.StatusCode, string(body))
}
