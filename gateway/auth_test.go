package gateway

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

func authStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "auth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func quietAuth(st *store.Store, fixed string, lim AuthLimits) *Auth {
	return NewAuthWith(st, AuthConfig{Fixed: fixed, Limits: lim, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func code(err error) core.Code {
	if err == nil {
		return ""
	}
	return core.AsError(err).Code
}

// The identity rule, one table for both dialects.
func TestAdmitIdentityRule(t *testing.T) {
	st := authStore(t)
	ctx := context.Background()
	laptopTok, laptop, _ := CreateToken(ctx, st, "laptop", "laptop")
	phoneTok, _, _ := CreateToken(ctx, st, "phone", "mobile:tel-5")
	shared, _, _ := CreateToken(ctx, st, "either", "tel-6")
	anyTok, _, _ := CreateToken(ctx, st, "any", "")
	a := quietAuth(st, "fixed-token", AuthLimits{})
	mob := []ExtraToken{{Token: "seven", ID: "binding", Device: "mobile:tel-7"}, {Token: "cron-token", ID: "deliver", Deliver: true}}
	iris := func(tok, dev string) Attempt {
		return Attempt{Dialect: DialectIris, Addr: "192.0.2.1", Token: tok, Device: dev}
	}
	phone := func(tok, dev string) Attempt {
		return Attempt{Dialect: DialectMobile, Addr: "192.0.2.1", Token: tok, Device: MobileDevicePrefix + dev, Extra: mob}
	}
	for _, tc := range []struct {
		name string
		at   Attempt
		want core.Code
	}{
		{"iris: bound token, its device", iris(laptopTok, "laptop"), ""},
		{"iris: bound token, another device", iris(laptopTok, "tablet"), core.CodeForbidden},
		{"iris: bound device, another valid token", iris("fixed-token", "laptop"), core.CodeForbidden},
		{"iris: bound device, an unbound stored token", iris(anyTok, "laptop"), core.CodeForbidden},
		{"iris: a phone's id", iris("fixed-token", "mobile:tel-1"), core.CodeAuth},
		{"iris: a phone's binding does not bind an Iris device of its name", iris("fixed-token", "tel-5"), ""},
		{"iris: the phone's token is not the Iris device's", iris(phoneTok, "tel-5"), core.CodeForbidden},
		{"iris: a mobile extra token is not an Iris token", iris("seven", "tel-7"), core.CodeAuth},
		{"iris: a bare binding binds the Iris device of its name", iris("fixed-token", "tel-6"), core.CodeForbidden},
		{"iris: its token", iris(shared, "tel-6"), ""},
		{"mobile: bound token, its device", phone(phoneTok, "tel-5"), ""},
		{"mobile: bound device, another token", phone("fixed-token", "tel-5"), core.CodeForbidden},
		{"mobile: a bare binding binds the phone too", phone("fixed-token", "tel-6"), core.CodeForbidden},
		{"mobile: its token", phone(shared, "tel-6"), ""},
		{"mobile: extra token, its device", phone("seven", "tel-7"), ""},
		{"mobile: extra-bound device, another token", phone("fixed-token", "tel-7"), core.CodeForbidden},
		{"mobile: a bound token, another phone", phone(laptopTok, "tablet"), core.CodeForbidden},
		{"mobile: a delivery token", phone("cron-token", "cron"), ""},
		{"no token", iris("", "x"), core.CodeAuth},
		{"wrong token", phone("nope", "tel-1"), core.CodeAuth},
	} {
		if _, err := a.Admit(ctx, tc.at); code(err) != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	g, err := a.Admit(ctx, iris(laptopTok, "laptop"))
	if err != nil || g.TokenID != laptop.ID {
		t.Fatalf("grant %+v, %v", g, err)
	}
	if g, _ := a.Admit(ctx, phone("cron-token", "cron")); !g.Deliver {
		t.Fatal("a delivery token's grant does not allow deliver")
	}
}

// Failures are counted per address and delayed past the free ones; a
// valid token from that address is never held back.
func TestAdmitThrottlesFailuresOnly(t *testing.T) {
	st := authStore(t)
	ctx := context.Background()
	a := quietAuth(st, "right", AuthLimits{Free: 3, Delay: 30 * time.Millisecond, MaxDelay: 60 * time.Millisecond})
	at := func(tok, addr string) Attempt {
		return Attempt{Dialect: DialectIris, Addr: addr, Token: tok, Device: "d"}
	}
	for i := range 3 {
		if _, err := a.Admit(ctx, at(fmt.Sprint("guess", i), "198.51.100.7")); code(err) != core.CodeAuth {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	start := time.Now()
	a.Admit(ctx, at("guess", "198.51.100.7"))
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("the failure past the free ones was answered after %v", d)
	}
	if _, err := a.Admit(ctx, at("right", "198.51.100.7")); err != nil {
		t.Fatalf("the valid token from the guessing address: %v", err)
	}

	f := newFailures(AuthLimits{Free: 2, Window: time.Minute, Delay: time.Second, MaxDelay: 8 * time.Second, MaxAddrs: 100})
	now := time.Now()
	var delays []time.Duration
	for range 7 {
		d, _, _, _ := f.fail("203.0.113.1", now)
		delays = append(delays, d)
	}
	if fmt.Sprint(delays) != "[0s 0s 1s 2s 4s 8s 8s]" {
		t.Fatalf("delays %v", delays)
	}
	if d, _, _, _ := f.fail("203.0.113.1", now.Add(61*time.Second)); d != 0 {
		t.Fatalf("after the window: %v", d)
	}
	// IPv6 addresses count by their /64.
	f.fail("2001:db8:1:2::1", now)
	f.fail("2001:db8:1:2::ffff", now)
	if d, n, _, _ := f.fail("2001:db8:1:2:aaaa::1", now); d != time.Second || n != 3 {
		t.Fatalf("a third address of one /64: delay %v after %d failures", d, n)
	}
	if _, n, _, _ := f.fail("2001:db8:1:3::1", now); n != 1 {
		t.Fatalf("another /64 shares a count: %d", n)
	}
	// A spray of addresses grows the map no further than its bound.
	for i := range 5000 {
		f.fail(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255), now)
	}
	if n := f.size(); n > 100 {
		t.Fatalf("%d addresses remembered, the bound is 100", n)
	}
}

// Tokens are stored as hashes only.
func TestCreateTokenStoresItsHash(t *testing.T) {
	st := authStore(t)
	tok, rec, err := CreateToken(context.Background(), st, "phone", "dev1")
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := st.Tokens(context.Background())
	h := sha256.Sum256([]byte(tok))
	if len(toks) != 1 || toks[0].ID != rec.ID || string(toks[0].Hash) != string(h[:]) || toks[0].DeviceID != "dev1" {
		t.Fatalf("stored %+v", toks)
	}
}

// agedTokens is a real store whose tokens' last use reads as age ago,
// counting the uses recorded.
type agedTokens struct {
	*store.Store
	age     time.Duration
	touches int
	reads   int
	// version is the store's TokensVersion: the test bumps it where time
	// passes, as tokenCacheAge would expire the cached list.
	version uint64
}

func (a *agedTokens) TokensVersion() uint64 { return a.version }

func (a *agedTokens) Tokens(ctx context.Context) ([]store.Token, error) {
	toks, err := a.Store.Tokens(ctx)
	a.reads++
	for i := range toks {
		if !toks[i].LastUsed.IsZero() {
			toks[i].LastUsed = toks[i].LastUsed.Add(-a.age)
		}
	}
	return toks, err
}

func (a *agedTokens) TouchToken(ctx context.Context, id string) error {
	a.touches++
	return a.Store.TouchToken(ctx, id)
}

// A hello records its token's use when the last record is TouchEvery old
// (or absent, or in the future), not at every hello.
func TestAdmitTouchesTokenAtMostEveryTouchEvery(t *testing.T) {
	st := &agedTokens{Store: authStore(t)}
	ctx := context.Background()
	tok, rec, err := CreateToken(ctx, st, "phone", "")
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthWith(st, AuthConfig{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hello := func() {
		t.Helper()
		if g, err := a.Admit(ctx, Attempt{Dialect: DialectIris, Addr: "10.0.0.1", Token: tok, Device: "phone"}); err != nil || g.TokenID != rec.ID {
			t.Fatalf("hello: %+v %v", g, err)
		}
	}
	for _, c := range []struct {
		age  time.Duration
		want int
	}{
		{0, 1},                        // never used: recorded
		{0, 1},                        // just recorded: not again
		{TouchEvery - time.Second, 1}, // still fresh
		{TouchEvery + time.Second, 2}, // stale: recorded
		{-time.Hour - TouchEvery, 3},  // in the future (a clock set back): recorded
	} {
		st.age = c.age
		st.version++
		hello()
		if st.touches != c.want {
			t.Fatalf("last use %v old: %d uses recorded, want %d", c.age, st.touches, c.want)
		}
	}
	toks, _ := st.Store.Tokens(ctx)
	if len(toks) != 1 || time.Since(toks[0].LastUsed) > time.Minute {
		t.Fatalf("the last use stored: %+v", toks)
	}
}

// tokenReads counts the reads of the tokens table.
type tokenReads struct {
	*store.Store
	reads int
}

func (r *tokenReads) Tokens(ctx context.Context) ([]store.Token, error) {
	r.reads++
	return r.Store.Tokens(ctx)
}

// Hellos check tokens against a list kept while the store says no token
// changed: a token revoked through it is refused at the next hello, one
// made by another process (a second handle on the file) works at once,
// and one revoked there is refused within tokenCacheAge.
func TestAdmitKeepsTheTokenListWhileNothingChanged(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "auth.db")
	open := func() *store.Store {
		st, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st := &tokenReads{Store: open()}
	a := quietAuth(st.Store, "", AuthLimits{})
	a.st = st
	n := 0
	hello := func(tok string) error {
		n++ // one address each: refusals are not throttled
		_, err := a.Admit(ctx, Attempt{Dialect: DialectIris, Addr: fmt.Sprintf("10.0.0.%d", n), Token: tok, Device: "phone"})
		return err
	}
	tok, rec, err := CreateToken(ctx, st, "phone", "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the first records the token's use, which drops the list
		if err := hello(tok); err != nil {
			t.Fatal(err)
		}
	}
	before := st.reads
	for range 5 {
		if err := hello(tok); err != nil {
			t.Fatal(err)
		}
	}
	if st.reads != before {
		t.Fatalf("5 hellos with nothing changed read the tokens %d times, want 0", st.reads-before)
	}
	if err := st.RevokeToken(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := hello(tok); code(err) != core.CodeAuth {
		t.Fatalf("a token revoked through the store: %v, want refused", err)
	}

	other := open()
	tok2, rec2, err := CreateToken(ctx, other, "tablet", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := hello(tok2); err != nil {
		t.Fatalf("a token another process made was refused: %v", err)
	}
	if err := hello(tok2); err != nil {
		t.Fatal(err)
	}
	if err := other.RevokeToken(ctx, rec2.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(tokenCacheAge + 5*time.Second)
	for hello(tok2) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("a token another process revoked is still admitted after %v", tokenCacheAge+5*time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A refusal the kept list would give is asked again of the store: when
// another process revoked the one token bound to a device, the owner's
// other token connects as it at once, not a second later.
func TestAdmitAsksTheStoreBeforeRefusing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "auth.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	a := quietAuth(st, "", AuthLimits{})
	owner, _, err := CreateToken(ctx, st, "laptop", "")
	if err != nil {
		t.Fatal(err)
	}
	_, boundRec, err := CreateToken(ctx, st, "old phone", "phone")
	if err != nil {
		t.Fatal(err)
	}
	hello := func(addr string) error {
		_, err := a.Admit(ctx, Attempt{Dialect: DialectIris, Addr: addr, Token: owner, Device: "phone"})
		return err
	}
	if err := hello("10.0.0.1"); code(err) != core.CodeForbidden {
		t.Fatalf("an unbound token as a device bound to another: %v, want refused", err)
	}
	if err := other.RevokeToken(ctx, boundRec.ID); err != nil {
		t.Fatal(err)
	}
	if err := hello("10.0.0.2"); err != nil {
		t.Fatalf("once the binding is revoked elsewhere the owner's token is refused: %v", err)
	}
}
