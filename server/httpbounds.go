package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/irisgate/irisgate/gateway"
)

// What an HTTP request can make the gateway hold, besides the WebSocket
// (whose upgrade is handed over to the waiting room before hello):
//
//   - A refused request (any status from 400 on: the origin guard, a
//     missing token, a wrong content type, the mux's 404 and 405) is
//     answered with Connection: close. net/http would otherwise read
//     the unread body to reuse the connection, waiting for ever on a
//     body that never comes.
//   - A request body must keep arriving: it has Config.BodyTimeout for its
//     first bytes and then as long as it arrives at minBodyRate or faster
//     (a slow but moving upload is never cut), after which the read fails
//     and the connection closes.
//   - One client address has at most Config.MaxRequestsPerAddr requests
//     being served at once; the next is refused (429) at once.

// minBodyRate is the slowest a request body may arrive, on average, once
// its BodyTimeout has passed: a 64 MiB file takes 34 minutes at it.
const minBodyRate = 32 << 10

// active counts the requests being served, by client address key.
type active struct {
	mu     sync.Mutex
	byAddr map[string]int
}

func (a *active) enter(key string, limit int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byAddr == nil {
		a.byAddr = map[string]int{}
	}
	if a.byAddr[key] >= limit {
		return false
	}
	a.byAddr[key]++
	return true
}

// serving is how many requests of key are being served (tests wait on it).
func (a *active) serving(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byAddr[key]
}

func (a *active) leave(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byAddr[key]--; a.byAddr[key] <= 0 {
		delete(a.byAddr, key)
	}
}

// httpBounds applies the bounds above to every request but the
// WebSocket's, whose refusals still close the connection.
func (s *Server) httpBounds(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &closeOnRefusal{ResponseWriter: w}
		w = cw
		if r.URL.Path == "/ws" {
			h.ServeHTTP(w, r)
			return
		}
		key := gateway.AddrKey(s.clientAddr(r))
		if !s.active.enter(key, s.cfg.MaxRequestsPerAddr) {
			s.m.Limited.WithLabelValues("http_active").Inc()
			writeError(w, ErrTooManyRequests.New())
			return
		}
		defer s.active.leave(key)
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			// The deadline stays when the handler is done with the body
			// unread: net/http then reads the rest, within it.
			b := &bodyClock{r: r.Body, rc: http.NewResponseController(w), start: time.Now(), grace: s.cfg.BodyTimeout}
			b.extend()
			r.Body = b
			cw.body = b
		}
		h.ServeHTTP(w, r)
	})
}

// bodyClock gives a request body a read deadline, moved on as its bytes
// arrive (see httpBounds).
type bodyClock struct {
	r     io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	read  int64
	at    time.Time // the deadline set
	done  bool
}

func (b *bodyClock) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	if err == io.EOF {
		// Read to its end, the body no longer needs a deadline: one
		// left would cancel the request's context while it is being
		// answered (net/http's background read).
		b.stop()
	} else if err == nil && n > 0 {
		b.extend()
	}
	return n, err
}

func (b *bodyClock) Close() error { return b.r.Close() }

// extend sets the deadline the bytes read so far have earned, when it is
// well past the one set (a system call per second at most, or per quarter
// of the grace when that is shorter).
func (b *bodyClock) extend() {
	if b.done {
		return
	}
	d := b.start.Add(b.grace + time.Duration(float64(b.read)/minBodyRate*float64(time.Second)))
	if !b.at.IsZero() && d.Sub(b.at) < min(time.Second, b.grace/4) {
		return
	}
	b.at = d
	b.rc.SetReadDeadline(d)
}

func (b *bodyClock) stop() {
	if !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
}

// closeOnRefusal answers every refusal with Connection: close. A small
// body still being sent is read first (refusalDrain, within
// refusalDrainTime): a client that is still writing it when the
// connection closes gets a broken pipe instead of the answer that says
// why (curl, Go's http.Client on a request refused before its body).
type closeOnRefusal struct {
	http.ResponseWriter
	body  io.Reader // the request's body, when it has one
	wrote bool
}

const (
	refusalDrain     = 64 << 10
	refusalDrainTime = time.Second
)

func (w *closeOnRefusal) WriteHeader(code int) {
	if !w.wrote && code >= 400 {
		w.Header().Set("Connection", "close")
		if w.body != nil {
			rc := http.NewResponseController(w.ResponseWriter)
			rc.SetReadDeadline(time.Now().Add(refusalDrainTime))
			io.CopyN(io.Discard, w.body, refusalDrain)
		}
		// net/http still reads what is left of the body when the
		// handler is done (up to 256 KiB), Connection: close or not: a
		// deadline already past ends that read at once.
		http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now())
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeOnRefusal) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach net/http's writer (deadlines,
// flushes).
func (w *closeOnRefusal) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the connection over (the WebSocket upgrade).
func (w *closeOnRefusal) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}
