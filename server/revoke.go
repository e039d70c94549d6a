package server

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/wire"
)

// tokenConns indexes the live connections by the token they said hello
// with, so that revoking a token ends its sessions at once.
type tokenConns struct {
	mu    sync.Mutex
	conns map[string]map[*hub.Conn]wire.Dialect // token id → connection → its dialect
	// revoked remembers recent revocations: a hello checked just before
	// its token was revoked registers just after, and is ended then.
	revoked map[string]time.Time
}

// revokedMemory is how long a revocation is remembered for hellos in
// flight: far longer than a hello takes between its check and its
// registration (one store write).
const revokedMemory = 10 * time.Minute

// add registers conn under token; false means the token was revoked
// meanwhile and conn has been closed.
func (t *tokenConns) add(token string, conn *hub.Conn, dialect wire.Dialect) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, gone := t.revoked[token]; gone {
		endRevoked(conn, dialect)
		return false
	}
	if t.conns == nil {
		t.conns = map[string]map[*hub.Conn]wire.Dialect{}
	}
	m := t.conns[token]
	if m == nil {
		m = map[*hub.Conn]wire.Dialect{}
		t.conns[token] = m
	}
	m[conn] = dialect
	return true
}

func (t *tokenConns) remove(token string, conn *hub.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.conns[token]; m != nil {
		delete(m, conn)
		if len(m) == 0 {
			delete(t.conns, token)
		}
	}
}

// revoke ends every live connection of token with its dialect's auth
// error and returns how many there were.
func (t *tokenConns) revoke(token string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.revoked == nil {
		t.revoked = map[string]time.Time{}
	}
	for k, at := range t.revoked {
		if now.Sub(at) > revokedMemory {
			delete(t.revoked, k)
		}
	}
	t.revoked[token] = now
	m := t.conns[token]
	delete(t.conns, token)
	for conn, dialect := range m {
		endRevoked(conn, dialect)
	}
	return len(m)
}

// endRevoked queues the dialect's auth error and closes the connection
// after it with 1008.
func endRevoked(conn *hub.Conn, dialect wire.Dialect) { end(conn, dialect.Revoked()) }

// stored lists the stored tokens (tok_…) that have live connections: the
// fixed, bound and delivery tokens of the configuration cannot be revoked.
func (t *tokenConns) stored() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id := range t.conns {
		if strings.HasPrefix(id, "tok_") {
			ids = append(ids, id)
		}
	}
	return ids
}

// watchTokens ends, within a tick, the sessions of tokens that left the
// database some other way than the admin socket (whose revocations end
// them at once): an irisgate older than the admin socket revoking on the
// data directory itself, or a hand edit. It reads the tokens only while
// stored tokens have live connections.
func (s *Server) watchTokens(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	// Tokens deleted while no gateway ran leave push registrations.
	s.dropPush(ctx, "")
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		live := s.tokens.stored()
		if len(live) == 0 {
			continue
		}
		toks, err := s.gw.Store().Tokens(ctx)
		if err != nil {
			continue
		}
		have := make(map[string]bool, len(toks))
		for _, tk := range toks {
			have[tk.ID] = true
		}
		for _, id := range live {
			if !have[id] {
				n := s.Revoke(id)
				s.log.Info("a token was removed from the database: its connections are closed", "token_id", id, "closed_connections", n)
				s.dropPush(ctx, id)
			}
		}
	}
}

// Revoke ends the live sessions of a token that was just revoked (both
// dialects: an error frame with the dialect's auth code, then close 1008)
// and returns how many it ended. Hellos checked before the revocation and
// not yet registered are ended as they register.
func (s *Server) Revoke(tokenID string) int { return s.tokens.revoke(tokenID) }

// dropPush ends the push registrations of the devices of a token removed
// from the database (tokenID "": of every removed token), which a
// revocation through the store does itself.
func (s *Server) dropPush(ctx context.Context, tokenID string) {
	n, err := s.gw.Store().DropPushOfRevoked(ctx, tokenID)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("dropping the push registrations of a removed token", "err", err)
		}
		return
	}
	if n > 0 {
		s.log.Info("push registrations of devices whose token was removed are dropped", "token_id", tokenID, "devices", n)
	}
}
