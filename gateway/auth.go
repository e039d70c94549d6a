package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Dialects, as Auth's logs and metrics name them.
const (
	DialectIris   = "iris"
	DialectMobile = "mobile"
)

// MobileDevicePrefix begins the gateway's id of every Hermes Mobile
// device ("mobile:" + its device.id). Iris device ids may not begin with
// it, so a device of one dialect can never pass for one of the other.
const MobileDevicePrefix = "mobile:"

// ServiceDevicePrefix begins the gateway's id of every delivery service
// (a Hermes Mobile connection with a delivery token): services have hub
// ids of their own, so a delivery token can never pass for, nor replace,
// a phone or an Iris device. Iris device ids may not begin with it.
const ServiceDevicePrefix = "service:"

// Auth admits devices: the one place where tokens and device identities
// are checked, for both dialects. A valid token is always accepted;
// failures are counted per client address and, past a few, answered
// only after a delay, so guessing is slow while the owner's devices are
// never locked out.
type Auth struct {
	st     TokenStore
	fixed  []byte // hash of IRISGATE_TOKEN, when set
	log    *slog.Logger
	fails  *failures
	lines  *lineBucket            // bounds the log lines of refused hellos
	failed *prometheus.CounterVec // by dialect and reason
	locked *prometheus.CounterVec // addresses that began to be throttled, by dialect

	stopOnce sync.Once
	stopped  chan struct{} // closed by StopDelays

	cache tokenCache // authcache.go
}

// AuthConfig configures NewAuthWith.
type AuthConfig struct {
	Fixed  string // a token that is always valid (for scripts and containers)
	Limits AuthLimits
	Log    *slog.Logger
}

// AuthLimits bound guessing. Zero fields take the defaults.
type AuthLimits struct {
	Free     int           // failures per address and Window answered at once (10)
	Window   time.Duration // how long failures are remembered (1 min)
	Delay    time.Duration // delay of the first failure past Free; it doubles with each (1 s)
	MaxDelay time.Duration // the longest delay (8 s)
	MaxAddrs int           // addresses remembered at most (10,000)
	// MaxDelayed and MaxDelayedAll bound the failing hellos held back at
	// once, per address (4) and in all (256): each holds a socket and a
	// goroutine. A failure past them is refused at once (rate_limited).
	MaxDelayed, MaxDelayedAll int
	// LogEvery and LogBurst bound the log lines of failed hellos, over
	// all addresses: one per LogEvery (1 s) after a burst of LogBurst
	// (20); the lines left out are counted in the next one.
	LogEvery time.Duration
	LogBurst int
}

func (l *AuthLimits) defaults() {
	if l.Free == 0 {
		l.Free = 10
	}
	if l.Window == 0 {
		l.Window = time.Minute
	}
	if l.Delay == 0 {
		l.Delay = time.Second
	}
	if l.MaxDelay == 0 {
		l.MaxDelay = 8 * time.Second
	}
	if l.MaxAddrs == 0 {
		l.MaxAddrs = 10000
	}
	if l.MaxDelayed == 0 {
		l.MaxDelayed = 4
	}
	if l.MaxDelayedAll == 0 {
		l.MaxDelayedAll = 256
	}
	if l.LogEvery == 0 {
		l.LogEvery = time.Second
	}
	if l.LogBurst == 0 {
		l.LogBurst = 20
	}
}

// NewAuth makes an authenticator; fixed, when not empty, is a token that
// is always valid.
func NewAuth(st TokenStore, fixed string) *Auth { return NewAuthWith(st, AuthConfig{Fixed: fixed}) }

// NewAuthWith makes an authenticator.
func NewAuthWith(st TokenStore, cfg AuthConfig) *Auth {
	cfg.Limits.defaults()
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	a := &Auth{st: st, log: cfg.Log, fails: newFailures(cfg.Limits), stopped: make(chan struct{}),
		lines: &lineBucket{every: cfg.Limits.LogEvery, burst: cfg.Limits.LogBurst, tokens: float64(cfg.Limits.LogBurst)},
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_auth_failures_total",
			Help: "Refused hellos, by dialect and reason."}, []string{"dialect", "reason"}),
		locked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_auth_lockouts_total",
			Help: "Times an address passed the free failures and its failing hellos began to be delayed, by dialect."}, []string{"dialect"}),
	}
	if cfg.Fixed != "" {
		h := sha256.Sum256([]byte(cfg.Fixed))
		a.fixed = h[:]
	}
	return a
}

// StopDelays answers every delayed failure now, and any later one at
// once: a shutdown does not wait for them.
func (a *Auth) StopDelays() { a.stopOnce.Do(func() { close(a.stopped) }) }

// Collectors are Auth's metrics, for the gateway's registry.
func (a *Auth) Collectors() []prometheus.Collector { return []prometheus.Collector{a.failed, a.locked} }

// ExtraToken is a token a dialect's own configuration admits besides the
// fixed and the stored ones: Hermes Mobile's bound tokens and delivery
// tokens (wire/mobile).
type ExtraToken struct {
	Token string
	ID    string // the grant's TokenID ("binding", "deliver")
	// Device, when set, binds the token (the identity rule): an id in the
	// gateway, or a Hermes Mobile device.id.
	Device  string
	Deliver bool // the grant may send deliver frames
}

// Attempt is one hello to admit.
type Attempt struct {
	Dialect string // DialectIris or DialectMobile
	// Addr is the client's address: the socket's peer, or the client a
	// trusted proxy named.
	Addr  string
	Token string
	// Device is the device's id in the gateway: Iris's device_id as
	// sent, MobileDevicePrefix + a Hermes Mobile device.id.
	Device string
	// Extra are the dialect's own tokens.
	Extra []ExtraToken
	// Allow, when set, has the last word on a hello the tokens admit
	// (Hermes Mobile's allowed devices): its error refuses it.
	Allow func(Grant) error
}

// Grant is what an admitted hello may do.
type Grant struct {
	TokenID string // the stored token's id, or "env", "binding", "deliver"
	Deliver bool   // a delivery token: deliver frames are allowed
}

// Why a hello was refused, for the metrics and the log.
const (
	reasonNoToken     = "no_token"
	reasonBadToken    = "invalid_token"
	reasonBoundToken  = "token_bound_to_other_device"
	reasonBoundDevice = "device_bound_to_other_token"
	reasonNotAllowed  = "device_not_allowed"
	reasonReserved    = "reserved_device_id"
	reasonStore       = "store_error"
	reasonBadDevice   = "invalid_device_id"
	// reasonHeld: a failure answered at once because as many of its
	// address's failures were being held back as may be.
	reasonHeld = "too_many_delayed"
)

// errHeld refuses a failing hello at once when its address has as many
// delayed answers pending as it may.
var errHeld = ErrHellosHeld.New()

// logLine logs a line about a refused hello, within the global bound on
// such lines (AuthLimits.LogEvery, LogBurst).
func (a *Auth) logLine(now time.Time, msg string, args ...any) {
	ok, skipped := a.lines.take(now)
	if !ok {
		return
	}
	if skipped > 0 {
		args = append(args, "lines_left_out", skipped)
	}
	a.log.Warn(msg, args...)
}

// maxLoggedID bounds a device id in the log: it is the client's choice.
const maxLoggedID = 64

func truncateID(id string) string {
	if len(id) <= maxLoggedID {
		return id
	}
	cut := maxLoggedID
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	return id[:cut] + "…"
}

// Admit checks a hello. Errors: CodeAuth (no or an unknown token, an
// Iris id in the Hermes Mobile or the delivery services' namespace),
// CodeUnsupported (an Iris device_id that is not one), CodeForbidden (a
// token bound to another device, or a bound device claimed with another
// token), CodeRateLimited (errHeld), and whatever Attempt.Allow refuses
// with. A hello with a wrong token
// counts as a failure of its address; past AuthLimits.Free of them its
// answer waits (within ctx). A valid token is never held back by its
// address's failures.
//
// The identity rule, the same for both dialects: a token bound to a
// device admits only that device, and a device some token is bound to is
// admitted only with one of its tokens. A binding names a device by its
// id in the gateway ("laptop", "mobile:phone1") or, for a Hermes Mobile
// device, by its device.id alone ("phone1" binds both the Iris device
// "phone1" and the phone "mobile:phone1").
func (a *Auth) Admit(ctx context.Context, at Attempt) (Grant, error) {
	g, reason, err := a.admit(ctx, at)
	if err == nil {
		return g, nil
	}
	a.failed.WithLabelValues(at.Dialect, reason).Inc()
	var delay time.Duration
	device := truncateID(at.Device)
	if reason == reasonNoToken || reason == reasonBadToken {
		// A guess. Device refusals come with a valid token: their
		// sender has nothing left to guess.
		var n int
		var log, lockout bool
		now := time.Now()
		delay, n, log, lockout = a.fails.fail(at.Addr, now)
		if lockout {
			a.locked.WithLabelValues(at.Dialect).Inc()
			a.logLine(now, "auth: too many failed hellos from one address: its failures are delayed now",
				"addr", at.Addr, "dialect", at.Dialect, "failures", n)
		}
		if log {
			a.logLine(now, "auth: failed hello", "addr", at.Addr, "dialect", at.Dialect, "reason", reason, "device", device)
		}
		if delay > 0 {
			// Each delayed answer holds a socket: past a few per address
			// (and a bound in all) the answer is given at once instead,
			// a refusal that says to wait.
			if !a.fails.hold(at.Addr) {
				a.failed.WithLabelValues(at.Dialect, reasonHeld).Inc()
				return Grant{}, errHeld
			}
			defer a.fails.unhold(at.Addr)
		}
	} else if reason != reasonStore {
		a.logLine(time.Now(), "auth: refused hello", "addr", at.Addr, "dialect", at.Dialect, "reason", reason, "device", device)
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		case <-a.stopped:
			t.Stop()
		}
	}
	return Grant{}, err
}

func (a *Auth) admit(ctx context.Context, at Attempt) (Grant, string, error) {
	if at.Dialect == DialectIris && strings.HasPrefix(at.Device, MobileDevicePrefix) {
		return Grant{}, reasonReserved, ErrReservedDevice.New(MobileDevicePrefix)
	}
	if at.Dialect == DialectIris && at.Device != "" && ValidBinding(at.Device) != nil {
		return Grant{}, reasonBadDevice, ErrDeviceID.New(MaxBindingLen)
	}
	if at.Dialect == DialectIris && strings.HasPrefix(at.Device, ServiceDevicePrefix) {
		return Grant{}, reasonReserved, ErrServiceDevice.New(ServiceDevicePrefix)
	}
	if at.Token == "" {
		return Grant{}, reasonNoToken, ErrNoToken.New()
	}
	h := sha256.Sum256([]byte(at.Token))
	eq := func(hash []byte) bool { return subtle.ConstantTimeCompare(h[:], hash) == 1 }
	var (
		g       Grant
		matched bool
		boundTo []string // devices the presented token is bound to
		bound   bool     // some token is bound to the device
	)
	// Every candidate is compared, in constant time each, so the time
	// taken says nothing about which (if any) matched. Bound tokens come
	// first: a token bound to a device is bound whatever else it is.
	for _, e := range at.Extra {
		if e.Device == "" {
			continue
		}
		if bindingNames(e.Device, at.Device) {
			bound = true
		}
		if th := sha256.Sum256([]byte(e.Token)); eq(th[:]) {
			matched, g.TokenID = true, e.ID
			boundTo = append(boundTo, e.Device)
		}
	}
	for _, e := range at.Extra {
		if th := sha256.Sum256([]byte(e.Token)); e.Device == "" && eq(th[:]) && !matched {
			matched, g = true, Grant{TokenID: e.ID, Deliver: e.Deliver}
		}
	}
	if a.fixed != nil && eq(a.fixed) && !matched {
		matched, g.TokenID = true, "env"
	}
	// The stored tokens decide the rest. When the answer from the list
	// kept in memory is a refusal, the store is read afresh and asked
	// again: a token made, or a binding removed, by another process since
	// the list was read never keeps a device out.
	decide := func(toks []store.Token) (*store.Token, Grant, string, error) {
		g, matched, bound := g, matched, bound
		boundTo := slices.Clip(boundTo)
		stored, boundStored := findToken(toks, eq, at.Device)
		bound = bound || boundStored
		if stored != nil && !matched {
			matched, g.TokenID = true, stored.ID
			if stored.DeviceID != "" {
				boundTo = append(boundTo, stored.DeviceID)
			}
		}
		switch {
		case !matched:
			return nil, Grant{}, reasonBadToken, ErrBadToken.New()
		case len(boundTo) > 0 && !slices.ContainsFunc(boundTo, func(b string) bool { return bindingNames(b, at.Device) }):
			return nil, Grant{}, reasonBoundToken, ErrTokenBound.New()
		case len(boundTo) == 0 && bound:
			return nil, Grant{}, reasonBoundDevice, ErrDeviceBound.New(quote(at.Device))
		}
		return stored, g, "", nil
	}
	toks, cached, err := a.tokens(ctx, false)
	if err != nil {
		return Grant{}, reasonStore, err
	}
	stored, g, reason, err := decide(toks)
	if err != nil && cached {
		if toks, _, err = a.tokens(ctx, true); err != nil {
			return Grant{}, reasonStore, err
		}
		stored, g, reason, err = decide(toks)
	}
	if err != nil {
		return Grant{}, reason, err
	}
	if at.Allow != nil {
		if err := at.Allow(g); err != nil {
			return Grant{}, reasonNotAllowed, err
		}
	}
	if stored != nil && g.TokenID == stored.ID {
		if since := time.Since(stored.LastUsed); since >= TouchEvery || since < 0 {
			a.touch(ctx, stored)
		}
	}
	return g, "", nil
}

// findToken scans every stored token, in constant time each: the one
// whose hash eq matches, and whether some token is bound to device.
func findToken(toks []store.Token, eq func([]byte) bool, device string) (stored *store.Token, bound bool) {
	for i := range toks {
		if eq(toks[i].Hash) {
			stored = &toks[i]
		}
		if toks[i].DeviceID != "" && bindingNames(toks[i].DeviceID, device) {
			bound = true
		}
	}
	return stored, bound
}

// TouchEvery is how stale a token's last use may be before a hello
// records it again: the record says when a token was last used (token
// list), to the minute, and a write transaction at every hello of every
// device was one commit more on the hello's path than the device's row.
const TouchEvery = time.Minute

// bindingNames reports whether a token's binding names device (an id in
// the gateway): that id, or a Hermes Mobile device's own device.id.
func bindingNames(binding, device string) bool {
	if binding == device {
		return true
	}
	id, mobile := strings.CutPrefix(device, MobileDevicePrefix)
	return mobile && binding == id
}

// MaxBindingLen bounds a token's device binding.
const MaxBindingLen = 128

// ValidBinding checks a device id a token is to be bound to ("" binds
// none).
func ValidBinding(deviceID string) error {
	if len(deviceID) > MaxBindingLen || !utf8.ValidString(deviceID) ||
		strings.ContainsFunc(deviceID, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) {
		return ErrBinding.New(MaxBindingLen)
	}
	if deviceID == MobileDevicePrefix {
		return ErrBindingPrefix.New(MobileDevicePrefix)
	}
	return nil
}

// CreateToken mints a device token, stores its hash and returns the token
// (shown once) with its record.
func CreateToken(ctx context.Context, st TokenStore, name, deviceID string) (string, store.Token, error) {
	var b [24]byte
	rand.Read(b[:])
	tok := "igt_" + hex.EncodeToString(b[:])
	h := sha256.Sum256([]byte(tok))
	t := store.Token{ID: core.NewID("tok_"), Hash: h[:], Name: name, DeviceID: deviceID, Created: time.Now()}
	return tok, t, st.AddToken(ctx, t)
}
