package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Auth checks device tokens and slows down guessing.
type Auth struct {
	st    *store.Store
	fixed []byte // hash of IRISGATE_TOKEN, when set

	mu       sync.Mutex
	failures map[string]*failWindow // by remote address
}

type failWindow struct {
	start time.Time
	n     int
}

// Auth-failure limit: after maxFailures in failWindowLen from one address
// every attempt from it is refused until the window ends.
const (
	maxFailures   = 10
	failWindowLen = time.Minute
)

// NewAuth makes an authenticator; fixed, when not empty, is a token that
// is always valid (for scripts and containers).
func NewAuth(st *store.Store, fixed string) *Auth {
	a := &Auth{st: st, failures: make(map[string]*failWindow)}
	if fixed != "" {
		h := sha256.Sum256([]byte(fixed))
		a.fixed = h[:]
	}
	return a
}

// Check admits token for deviceID from addr. It returns the token's id
// ("env" for the fixed token).
func (a *Auth) Check(ctx context.Context, addr, token, deviceID string) (string, error) {
	if a.limited(addr) {
		return "", core.Errorf(core.CodeRateLimited, "too many failed attempts from this address; try again in a minute")
	}
	id, err := a.check(ctx, token, deviceID)
	if err != nil {
		a.fail(addr)
	}
	return id, err
}

func (a *Auth) check(ctx context.Context, token, deviceID string) (string, error) {
	if token == "" {
		return "", core.Errorf(core.CodeAuth, "hello carries no token")
	}
	h := sha256.Sum256([]byte(token))
	if a.fixed != nil && subtle.ConstantTimeCompare(h[:], a.fixed) == 1 {
		return "env", nil
	}
	toks, err := a.st.Tokens(ctx)
	if err != nil {
		return "", err
	}
	// Compare against every token, in constant time each, so the time
	// taken says nothing about which (if any) matched.
	var match *store.Token
	for i := range toks {
		if subtle.ConstantTimeCompare(h[:], toks[i].Hash) == 1 {
			match = &toks[i]
		}
	}
	if match == nil {
		return "", core.Errorf(core.CodeAuth, "invalid token")
	}
	if match.DeviceID != "" && match.DeviceID != deviceID {
		return "", core.Errorf(core.CodeAuth, "this token is bound to another device")
	}
	a.st.TouchToken(ctx, match.ID)
	return match.ID, nil
}

func (a *Auth) limited(addr string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.failures[addr]
	if w == nil {
		return false
	}
	if time.Since(w.start) > failWindowLen {
		delete(a.failures, addr)
		return false
	}
	return w.n >= maxFailures
}

func (a *Auth) fail(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.failures) > 10000 { // bound the map under a spray of addresses
		for k, w := range a.failures {
			if time.Since(w.start) > failWindowLen {
				delete(a.failures, k)
			}
		}
	}
	w := a.failures[addr]
	if w == nil || time.Since(w.start) > failWindowLen {
		w = &failWindow{start: time.Now()}
		a.failures[addr] = w
	}
	w.n++
}

// CreateToken mints a device token, stores its hash and returns the token
// (shown once) with its record.
func CreateToken(ctx context.Context, st *store.Store, name, deviceID string) (string, store.Token, error) {
	var b [24]byte
	rand.Read(b[:])
	tok := "igt_" + hex.EncodeToString(b[:])
	h := sha256.Sum256([]byte(tok))
	t := store.Token{ID: core.NewID("tok_"), Hash: h[:], Name: name, DeviceID: deviceID, Created: time.Now()}
	return tok, t, st.AddToken(ctx, t)
}
