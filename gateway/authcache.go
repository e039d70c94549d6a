package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/irisgate/irisgate/store"
)

// The stored tokens, as hellos check them. Reading the tokens table at
// every hello was a read transaction on a handshake's path (~12 % of its
// CPU, more with every token paired). The list is kept while the store
// says no token changed (TokensVersion: it counts its own writes, so a
// token made or revoked through the admin socket counts at once) and for
// at most tokenCacheAge, which bounds what the store cannot count: a
// change by another process (irisgate token ... beside a gateway whose
// admin socket does not answer, a hand edit); a revocation there also
// ends the token's live sessions within the same second (watchTokens).
// A hello the list would refuse is asked again of the store, so a token
// made anywhere works at once.
const tokenCacheAge = time.Second

// tokenVersioner is a store that counts its writes of tokens (SQLite's,
// where this process is the only writer that counts; PostgreSQL's
// replicas share a table, so theirs is read at every hello).
type tokenVersioner interface {
	TokensVersion() uint64
}

type tokenCache struct {
	mu      sync.Mutex
	version uint64
	at      time.Time
	toks    []store.Token // shared: never changed once cached
}

// tokens returns the stored tokens, and whether they came from the
// cache; fresh skips it.
func (a *Auth) tokens(ctx context.Context, fresh bool) ([]store.Token, bool, error) {
	tv, ok := a.st.(tokenVersioner)
	if !ok {
		toks, err := a.st.Tokens(ctx)
		return toks, false, err
	}
	c := &a.cache
	// Both before the read: a write after it makes the list stale, and
	// the list is as old as the moment it began to be read.
	v, at := tv.TokensVersion(), time.Now()
	c.mu.Lock()
	if !fresh && c.toks != nil && c.version == v && time.Since(c.at) < tokenCacheAge {
		toks := c.toks
		c.mu.Unlock()
		return toks, true, nil
	}
	c.mu.Unlock()
	toks, err := a.st.Tokens(ctx)
	if err != nil {
		return nil, false, err
	}
	if toks == nil {
		toks = []store.Token{}
	}
	c.mu.Lock()
	c.version, c.at, c.toks = v, at, toks
	c.mu.Unlock()
	return toks, false, nil
}

// touch records t's use (TouchEvery) and drops the list, whose LastUsed
// is older now: the next hello reads it afresh, once a minute a token.
func (a *Auth) touch(ctx context.Context, t *store.Token) {
	a.st.TouchToken(ctx, t.ID)
	a.cache.mu.Lock()
	a.cache.toks = nil
	a.cache.mu.Unlock()
}
