// Package push wakes devices that are away: FCM (HTTP v1), ntfy and Web
// Push (VAPID). Pushes go through a durable queue in the store, so a
// failing backend is retried with backoff across restarts and never delays
// live delivery; pushes to one device are collapsed per lane.
package push

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/irisgate/irisgate/store"
)

// Kinds of push.
const (
	KindMessage      = "message"
	KindCron         = "cron" // a cron post or a delivery from a script
	KindNotification = "notification"
	KindPicker       = "picker" // the agent asks: an approval or a question
)

// Note is what a push says.
type Note struct {
	Title     string
	Body      string
	ChatID    string
	ThreadID  string
	MessageID string // the message announced, when it is one
	Cursor    int64
	Kind      string // KindMessage | KindCron | KindNotification | KindPicker
	// Collapse groups pushes that replace each other (one per lane).
	Collapse string
}

// priority is ntfy's scale, which the other backends map from: the agent
// asking is high (4), the rest default (3).
func (n Note) priority() int {
	if n.Kind == KindPicker {
		return 4
	}
	return 3
}

// tag is the emoji tag of the push (ntfy's Tags, an app's icon choice).
func (n Note) tag() string {
	switch n.Kind {
	case KindPicker:
		return "question"
	case KindCron:
		return "alarm_clock"
	}
	return "speech_balloon"
}

// Backend sends a note to one registration.
type Backend interface {
	Name() string // fcm | ntfy | webpush
	// Address picks the registration this backend uses ("" when the
	// device has none for it).
	Address(store.Device) string
	// Send makes one request; its error is an *Error when the service
	// answered (see ErrGone and the others), any other error is passing.
	Send(ctx context.Context, address string, n Note) error
}

// Content modes: what a push reveals.
const (
	ContentFull    = "full"
	ContentPreview = "preview"
	ContentIDs     = "ids"
)

// Defaults of Config. DefaultHold is the command line's: a zero Hold
// sends at once.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 8
	DefaultHold        = 2 * time.Second
	// DefaultClaimFor is how long a push handed to a sender stays its own
	// (store ClaimPushes): longer than any send takes (a device's pushes
	// go one after another, each bounded by Timeout per backend), short
	// enough that a replica that died mid-send delays its pushes by
	// minutes, not hours.
	DefaultClaimFor = 5 * time.Minute
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
	// Hold is how long a lane's first push waits for more news of that
	// lane before it goes out (0: none). What arrives meanwhile is merged
	// into it: ntfy cannot update a notification, so without a hold a
	// picker and its notification, or a cron post and its notification,
	// would be two.
	Hold time.Duration
	// Timeout bounds each request to a push service (DefaultTimeout).
	Timeout time.Duration
	// Concurrency is how many devices are worked at once
	// (DefaultConcurrency); each device's pushes go out one at a time, in
	// order.
	Concurrency int
	// ClaimFor is how long a claimed push is this sender's
	// (DefaultClaimFor).
	ClaimFor time.Duration
	// Metrics, when set, gets irisgate_push_total{backend,outcome} and
	// irisgate_push_claimed_total.
	Metrics prometheus.Registerer
}

// Pusher queues and sends pushes.
type Pusher struct {
	cfg      Config
	st       Store
	log      *slog.Logger
	wake     chan struct{}
	outcomes *prometheus.CounterVec
	claimed  prometheus.Counter

	// dispatching makes one dispatch at a time: a push claimed by one is
	// in busy before another looks, so SendDue waits for the Run loop's
	// workers instead of finding their pushes claimed and no worker yet.
	dispatching sync.Mutex

	mu sync.Mutex
	// busy has a channel for each device being worked, closed when its
	// worker is done: a device is worked by one worker at a time.
	busy map[string]chan struct{}
	// more: the last dispatch left due devices for want of a free worker.
	more bool
	// warned holds the backend/outcome pairs logged since the backend
	// last worked: a wrong token is said once, not at every push.
	warned map[string]bool
	// changed is closed at the next change of the queue (Changed).
	changed chan struct{}
}

// New makes a pusher; Run sends.
func New(st Store, log *slog.Logger, cfg Config) *Pusher {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Content == "" {
		cfg.Content = ContentPreview
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.ClaimFor <= 0 {
		cfg.ClaimFor = DefaultClaimFor
	}
	p := &Pusher{cfg: cfg, st: st, log: log, wake: make(chan struct{}, 1), busy: map[string]chan struct{}{}, warned: map[string]bool{}}
	p.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "irisgate_push_total", Help: "Push attempts, by backend and outcome (sent, gone, invalid_address, refused, auth, misconfigured, rate_limited, timeout, failed, given_up).",
	}, []string{"backend", "outcome"})
	// A claim holds at least two sends: one that cannot end within its
	// claim is never tried (work).
	p.cfg.ClaimFor = max(p.cfg.ClaimFor, 2*p.sendTime())
	p.claimed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "irisgate_push_claimed_total", Help: "Pushes this gateway claimed from the queue to send (with replicas, each push is claimed by one of them at a time).",
	})
	if cfg.Metrics != nil {
		if err := cfg.Metrics.Register(p.outcomes); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				p.outcomes = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
		if err := cfg.Metrics.Register(p.claimed); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				p.claimed = are.ExistingCollector.(prometheus.Counter)
			}
		}
	}
	return p
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

// Enqueue queues a note for a device, merged with one still pending for
// the same lane (see store.EnqueuePush): the device gets one push for a
// burst, showing its most urgent news.
func (p *Pusher) Enqueue(ctx context.Context, deviceID string, n Note) error {
	n = p.redact(n)
	now := p.cfg.Now()
	err := p.st.EnqueuePush(ctx, store.PushJob{
		DeviceID: deviceID, Collapse: n.Collapse, Cursor: n.Cursor,
		Title: n.Title, Body: n.Body, ChatID: n.ChatID, ThreadID: n.ThreadID, Kind: n.Kind,
		Priority: n.priority(), MessageID: n.MessageID, NextAt: now.Add(p.cfg.Hold),
	}, now)
	if err == nil {
		p.poke()
		p.change()
	}
	return err
}

// Changed returns a channel closed at the pusher's next change: a push
// queued, or one tried (its outcome counted, recorded as sent, given up,
// dropped or put back for a retry). A waiter takes it, checks what it
// waits for, and waits on it.
func (p *Pusher) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

func (p *Pusher) change() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

func (p *Pusher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
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
// It never waits on a push service itself: each device with due pushes is
// handed to a worker, so one that hangs delays only its own device. On
// the way out it waits for the workers, whose requests ctx has cut off;
// what they had not finished stays queued for the next start.
func (p *Pusher) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	defer p.drain()
	for {
		p.dispatch(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.wake:
		}
	}
}

// SendDue sends every push whose time has come and returns once they were
// tried, including those a running worker already had; tests call it.
func (p *Pusher) SendDue(ctx context.Context) {
	for {
		done, more := p.dispatch(ctx)
		for _, d := range done {
			select {
			case <-d:
			case <-ctx.Done():
				return
			}
		}
		if !more {
			return
		}
		p.drain() // every worker was busy: wait for them, then go on
	}
}

// drain waits for every worker.
func (p *Pusher) drain() {
	p.mu.Lock()
	var done []chan struct{}
	for _, d := range p.busy {
		done = append(done, d)
	}
	p.mu.Unlock()
	for _, d := range done {
		<-d
	}
}

// maxAttempts bounds the tries of one push (about 3.5 hours of backoff).
const maxAttempts = 12

// dispatch claims the due pushes of the devices no worker has (several
// replicas work one queue: a claimed push is this one's alone until the
// claim ends) and starts a worker for each device, up to Concurrency at
// once. It returns the done channels of every worker (started now or
// before) and whether some due device is left for want of a free worker.
func (p *Pusher) dispatch(ctx context.Context) (done []chan struct{}, more bool) {
	if ctx.Err() != nil {
		return nil, false
	}
	p.dispatching.Lock()
	defer p.dispatching.Unlock()
	p.mu.Lock()
	busy := make([]string, 0, len(p.busy))
	for dev := range p.busy {
		busy = append(busy, dev)
	}
	free := p.cfg.Concurrency - len(p.busy)
	p.mu.Unlock()
	if free <= 0 {
		p.mu.Lock()
		p.more = true
		for _, d := range p.busy {
			done = append(done, d)
		}
		p.mu.Unlock()
		return done, true
	}
	now := p.cfg.Now()
	// Claimed for free workers only: another replica's may be free for
	// the rest.
	jobs, err := p.st.ClaimPushes(ctx, now, now.Add(p.cfg.ClaimFor), free, 1000, busy)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("push queue", "err", err)
		}
		return nil, false
	}
	p.claimed.Add(float64(len(jobs)))
	// Due order within a device is kept: its worker sends them in turn.
	var order []string
	byDev := map[string][]store.PushJob{}
	for _, j := range jobs {
		if _, ok := byDev[j.DeviceID]; !ok {
			order = append(order, j.DeviceID)
		}
		byDev[j.DeviceID] = append(byDev[j.DeviceID], j)
	}
	var unwanted []store.PushJob
	p.mu.Lock()
	for _, d := range p.busy {
		done = append(done, d)
	}
	for _, dev := range order {
		if _, ok := p.busy[dev]; ok {
			// A worker started since the claim (another dispatch): it
			// goes out after, claimed again.
			unwanted = append(unwanted, byDev[dev]...)
			continue
		}
		if len(p.busy) >= p.cfg.Concurrency {
			more = true
			unwanted = append(unwanted, byDev[dev]...)
			continue
		}
		d := make(chan struct{})
		p.busy[dev] = d
		done = append(done, d)
		go p.work(ctx, dev, byDev[dev], d)
	}
	// Every free worker got a device: more may be due, unclaimed.
	more = more || len(order) >= free
	p.more = more
	p.mu.Unlock()
	p.release(context.WithoutCancel(ctx), unwanted)
	return done, more
}

// release lets go of the claims of pushes this sender will not send now:
// they are the next dispatch's, here or on another replica, at once
// rather than when the claim ends.
func (p *Pusher) release(ctx context.Context, js []store.PushJob) {
	for _, j := range js {
		if err := p.st.ReleasePush(ctx, j); err != nil {
			p.log.Warn("push queue: releasing a claim", "err", err)
		}
	}
}

// work sends one device's due pushes, one after another.
func (p *Pusher) work(ctx context.Context, dev string, jobs []store.PushJob, done chan struct{}) {
	defer func() {
		p.mu.Lock()
		delete(p.busy, dev)
		more := p.more
		p.mu.Unlock()
		close(done)
		if more {
			p.poke() // a worker is free for a device left waiting
		}
	}()
	for i, j := range jobs {
		// A send must end within its claim, or another replica could send
		// it too: a push whose claim would run out first (the device's
		// earlier sends were slow) is claimed again later.
		if ctx.Err() != nil || (j.Claim != 0 && p.cfg.Now().Add(p.sendTime()).UnixMilli() > j.Claim) {
			p.release(context.WithoutCancel(ctx), jobs[i:])
			return
		}
		p.send(ctx, j)
	}
}

// sendTime bounds one push's send: a request to each backend.
func (p *Pusher) sendTime() time.Duration {
	return time.Duration(len(p.cfg.Backends)+1) * p.cfg.Timeout
}

func (p *Pusher) send(ctx context.Context, j store.PushJob) {
	defer p.change()
	// What a finished attempt records is recorded even when the gateway
	// starts stopping right after it: a push sent must not be sent again.
	book := context.WithoutCancel(ctx)
	if p.cfg.Online != nil && p.cfg.Online(j.DeviceID) {
		p.st.DonePush(book, j)
		return
	}
	dev, err := p.st.Device(ctx, j.DeviceID)
	if err != nil {
		if ctx.Err() != nil {
			p.st.ReleasePush(book, j) // cut off by shutdown: it stays queued, untried
			return
		}
		// A registration that does not decode (*store.CorruptError): the
		// push backs off and is given up like a failing one, not tried
		// again every second ahead of the other devices' pushes.
		p.log.Warn("push: reading the device", "device", j.DeviceID, "err", err)
		p.retry(book, j, []string{err.Error()}, nil)
		return
	}
	if dev.Revoked { // queued before its token was revoked
		p.st.DonePush(book, j)
		return
	}
	n := Note{Title: j.Title, Body: j.Body, ChatID: j.ChatID, ThreadID: j.ThreadID, MessageID: j.MessageID,
		Cursor: j.Cursor, Kind: j.Kind, Collapse: j.Collapse}
	var failures, failed []string
	sent := false
	for _, b := range p.cfg.Backends {
		addr := b.Address(dev)
		if addr == "" {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		err := b.Send(sctx, addr, n)
		cancel()
		if err != nil && ctx.Err() != nil {
			p.st.ReleasePush(book, j) // cut off by shutdown: it stays queued, untried
			return
		}
		outcome := Outcome(err)
		p.outcomes.WithLabelValues(b.Name(), outcome).Inc()
		switch {
		case err == nil:
			sent = true
			p.works(b.Name())
		case errors.Is(err, ErrGone):
			p.log.Info("push registration gone, dropped", "device", j.DeviceID, "backend", b.Name(), "err", err)
			p.st.DropPushRegistration(book, j.DeviceID, b.Name())
		case errors.Is(err, ErrInvalidAddress):
			p.log.Warn("push address refused by the service, dropped: the device must register another", "device", j.DeviceID, "backend", b.Name(), "address", addr, "err", err)
			p.st.DropPushRegistration(book, j.DeviceID, b.Name())
		case errors.Is(err, ErrRefused):
			p.log.Warn("push refused, not retried", "device", j.DeviceID, "backend", b.Name(), "err", err)
		default:
			if outcome == "auth" || outcome == "misconfigured" || outcome == "rate_limited" {
				p.warnOnce(b.Name(), outcome, err)
			}
			failures = append(failures, err.Error())
			failed = append(failed, b.Name())
		}
	}
	if sent || len(failures) == 0 {
		if sent {
			p.st.SetLastPushed(book, j.DeviceID, j.Cursor)
		}
		p.st.DonePush(book, j)
		return
	}
	p.retry(book, j, failures, failed)
}

// retry schedules another attempt of a push that failed, or gives it up
// after maxAttempts; failed names the backends whose give-up is counted.
func (p *Pusher) retry(book context.Context, j store.PushJob, failures, failed []string) {
	if j.Attempts+1 >= maxAttempts {
		p.log.Warn("push given up", "device", j.DeviceID, "attempts", j.Attempts+1, "err", strings.Join(failures, "; "))
		for _, b := range failed {
			p.outcomes.WithLabelValues(b, "given_up").Inc()
		}
		p.st.DonePush(book, j)
		return
	}
	backoff := time.Duration(1<<min(j.Attempts, 12)) * 5 * time.Second
	p.st.RetryPush(book, j, p.cfg.Now().Add(min(backoff, time.Hour)), strings.Join(failures, "; "))
}

// warnOnce logs a failure only the operator can fix, once until the
// backend works again.
func (p *Pusher) warnOnce(backend, outcome string, err error) {
	key := backend + "/" + outcome
	p.mu.Lock()
	seen := p.warned[key]
	p.warned[key] = true
	p.mu.Unlock()
	if seen {
		return
	}
	lvl := slog.LevelError
	if outcome == "rate_limited" {
		lvl = slog.LevelWarn
	}
	p.log.Log(context.Background(), lvl, "push to "+backend+" fails: "+err.Error()+" (retried; said once until it works again)", "backend", backend, "outcome", outcome)
}

// works notes that a backend delivered, so a later failure is said again.
func (p *Pusher) works(backend string) {
	p.mu.Lock()
	var was []string
	for k := range p.warned {
		if strings.HasPrefix(k, backend+"/") {
			was = append(was, k)
			delete(p.warned, k)
		}
	}
	p.mu.Unlock()
	if len(was) > 0 {
		p.log.Info("push to " + backend + " works again")
	}
}
