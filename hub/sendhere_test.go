package hub

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// countingWriter is a queue's writer that counts its starts and drains.
// A writer sends on started as it starts and on stopped as it ends its
// turn, so a test can wait for the queue to be idle again.
func countingWriter(q *queue, started, stopped chan<- struct{}) func() {
	return func() {
		started <- struct{}{}
		defer func() { stopped <- struct{}{} }()
		for {
			buf, err := q.next(nil)
			if len(buf) == 0 || err != nil {
				return
			}
		}
	}
}

func noStart(t *testing.T, started <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-started:
		t.Fatalf("%s started a writer", what)
	default:
	}
}

func oneStart(t *testing.T, started <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s started no writer", what)
	}
}

// idle waits for the writer that oneStart saw to end its turn: until it
// has, the queue counts as written to and starts no other.
func idle(t *testing.T, stopped <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatalf("the writer %s started never stopped", what)
	}
}

// A reply queued with pushHere while the read loop holds the queue starts
// no writer: release leaves the writer to the loop. Any other frame starts
// one as ever (and it takes the reply along), as does a reply outside a
// hold, a large one, or one to a closed queue.
func TestSendHereLeavesTheReplyToTheReadLoop(t *testing.T) {
	started, stopped := make(chan struct{}, 8), make(chan struct{}, 8)
	q := newQueue(10, 1<<20)
	q.drive(countingWriter(q, started, stopped))

	q.hold()
	q.pushHere(Out{Data: []byte("pong")})
	noStart(t, started, "a reply during a hold")
	if !q.release() {
		t.Fatal("release left no writer to the read loop for its reply")
	}
	if buf, _ := q.next(nil); len(buf) != 1 || string(buf[0].Data) != "pong" {
		t.Fatalf("the read loop's writer got %d frames", len(buf))
	}
	if buf, _ := q.next(nil); len(buf) != 0 {
		t.Fatalf("%d frames left", len(buf))
	}
	noStart(t, started, "the read loop's own writer")

	// A broadcast during the hold starts a writer, which takes the reply.
	q.hold()
	q.pushHere(Out{Data: []byte("pong")})
	q.push(Out{Data: []byte("message")})
	oneStart(t, started, "a broadcast during a hold")
	if q.release() {
		t.Fatal("release asked the read loop to write while a writer ran")
	}
	idle(t, stopped, "a broadcast")

	// Outside a hold, pushHere is push.
	q.pushHere(Out{Data: []byte("sync.done")})
	oneStart(t, started, "a reply outside a hold")
	idle(t, stopped, "a reply outside a hold")

	// A large reply goes to a writer of its own: the read loop reads on.
	q.hold()
	q.pushHere(Out{Data: bytes.Repeat([]byte("h"), hereMax+1)})
	noStart(t, started, "a large reply during a hold")
	if q.release() {
		t.Fatal("release left a large reply to the read loop")
	}
	oneStart(t, started, "a large reply at release")
	idle(t, stopped, "a large reply")

	// The close of a held queue starts the writer that closes the socket.
	q.hold()
	q.pushHere(Out{Data: []byte("error")})
	q.close(ErrClosed)
	oneStart(t, started, "a close during a hold")
	if q.release() {
		t.Fatal("release asked the read loop to write after the close started a writer")
	}
}

// A replay waiting for room behind a reply left for release does not
// wait for the read loop's frame to end: the writer starts.
func TestSendHereDoesNotHoldUpAReplay(t *testing.T) {
	started, stopped := make(chan struct{}, 8), make(chan struct{}, 8)
	q := newQueue(4, 1<<20)
	q.drive(countingWriter(q, started, stopped))
	q.hold()
	for range 2 {
		q.pushHere(Out{Data: []byte("reply")})
	}
	noStart(t, started, "replies during a hold")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.pushWait(ctx, Out{Data: []byte("replayed"), Cursor: 1}); err != nil {
		t.Fatalf("a replay behind held replies: %v", err)
	}
	oneStart(t, started, "a replay waiting for room")
	q.release()
}
