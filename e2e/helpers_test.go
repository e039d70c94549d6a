// Package e2e holds end-to-end tests of irisgate: the real binary killed
// mid-stream and restarted, devices that stop reading, and malformed input
// over real sockets. Every frame a device receives is checked against the
// specification's schema.
package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// recorder reads one stream of frames (a Conn's or a Client's Events) in
// its own goroutine, validates each against the schema and keeps them, so
// a test can wait, with a deadline, for a condition on what has arrived.
type recorder struct {
	t    testing.TB
	name string

	mu     sync.Mutex
	frames []client.Frame
	notify chan struct{} // closed and replaced on every change
	closed bool          // the source channel ended
	done   chan struct{} // closed when the source channel ended
}

func record(t testing.TB, name string, src <-chan client.Frame) *recorder {
	t.Helper()
	return recordSlim(t, name, src, nil)
}

// recordSlim is record with slim, when not nil, applied to each frame
// after validation and before it is kept: a test that streams many large
// frames checks them there and keeps a small summary, so what it keeps
// does not blur the gateway's own memory use.
func recordSlim(t testing.TB, name string, src <-chan client.Frame, slim func(client.Frame) client.Frame) *recorder {
	t.Helper()
	v := testgw.Schema(t)
	r := &recorder{t: t, name: name, notify: make(chan struct{}), done: make(chan struct{})}
	// The reader reports to t: it must end before the test does, so the
	// test closes the source first (a deferred CloseNow, a stopped Client).
	t.Cleanup(func() {
		if !r.waitClosed(10 * time.Second) {
			t.Errorf("%s: the recorded connection was still open at the end of the test", name)
		}
	})
	go func() {
		defer close(r.done)
		for f := range src {
			if !f.Binary {
				if err := v.Server(f.Raw); err != nil {
					t.Errorf("%s received a frame that breaks the schema: %v", name, err)
				}
			}
			if slim != nil {
				f = slim(f)
			}
			r.mu.Lock()
			r.frames = append(r.frames, f)
			close(r.notify)
			r.notify = make(chan struct{})
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.closed = true
		close(r.notify)
		r.notify = make(chan struct{})
		r.mu.Unlock()
	}()
	return r
}

// snapshot returns the frames received so far.
func (r *recorder) snapshot() []client.Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]client.Frame(nil), r.frames...)
}

// waitFor waits until cond holds for the frames received so far, failing
// the test after timeout. It returns the frames it held for.
func (r *recorder) waitFor(timeout time.Duration, what string, cond func([]client.Frame) bool) []client.Frame {
	r.t.Helper()
	fs, ok := r.waitForOK(timeout, cond)
	if !ok {
		r.t.Fatalf("%s: %s not seen within %v; got %d frames: %s", r.name, what, timeout, len(fs), summary(fs))
	}
	return fs
}

// waitForOK is waitFor that reports a timeout instead of failing.
func (r *recorder) waitForOK(timeout time.Duration, cond func([]client.Frame) bool) ([]client.Frame, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		fs := append([]client.Frame(nil), r.frames...)
		ch := r.notify
		closed := r.closed
		r.mu.Unlock()
		if cond(fs) {
			return fs, true
		}
		if closed {
			return fs, false
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fs, false
		}
	}
}

// waitClosed waits until the source channel has ended.
func (r *recorder) waitClosed(timeout time.Duration) bool {
	select {
	case <-r.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// pl decodes a frame's payload into a generic map.
func pl(t testing.TB, f client.Frame) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(f.Payload, &m); err != nil {
		t.Fatalf("payload of %s: %v (%s)", f.Type, err, f.Raw)
	}
	return m
}

// str is a string field of a frame's payload ("" when absent).
func str(t testing.TB, f client.Frame, key string) string {
	t.Helper()
	s, _ := pl(t, f)[key].(string)
	return s
}

// num is an integer field of a frame's payload (0 when absent).
func num(t testing.TB, f client.Frame, key string) int64 {
	t.Helper()
	n, _ := pl(t, f)[key].(float64)
	return int64(n)
}

func laneOf(f client.Frame) client.Lane { return client.Lane{ChatID: f.ChatID, ThreadID: f.ThreadID} }

func count(fs []client.Frame, match func(client.Frame) bool) int {
	n := 0
	for _, f := range fs {
		if match(f) {
			n++
		}
	}
	return n
}

func has(fs []client.Frame, match func(client.Frame) bool) bool { return count(fs, match) > 0 }

// summary lists frame types compactly for failure messages.
func summary(fs []client.Frame) string {
	var b strings.Builder
	last, n := "", 0
	flush := func() {
		if n == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		if n == 1 {
			b.WriteString(last)
		} else {
			fmt.Fprintf(&b, "%s×%d", last, n)
		}
	}
	for _, f := range fs {
		typ := f.Type
		if f.Binary {
			typ = "<binary>"
		}
		if typ == last {
			n++
			continue
		}
		flush()
		last, n = typ, 1
	}
	flush()
	return b.String()
}

// words returns "<prefix>0 <prefix>1 … " : n words, each followed by a
// space except the last, which the echo agent streams back one by one.
func words(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%d", prefix, i)
	}
	return b.String()
}
