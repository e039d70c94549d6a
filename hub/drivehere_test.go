package hub

import (
	"testing"
	"time"
)

// driveHere leaves the writer due at once to its caller: the frames
// queued before it wait for the caller's drain, and no writer is started
// for them; once that drain ends its turn, a push starts one as drive's
// would.
func TestDriveHereLeavesTheFirstWriterToTheCaller(t *testing.T) {
	started, stopped := make(chan struct{}, 4), make(chan struct{}, 4)
	writer := func(q *queue) func() { return countingWriter(q, started, stopped) }
	q := newQueue(10, 1<<20)
	if q.driveHere(writer(q)) {
		t.Fatal("driveHere on an empty queue asked its caller to write")
	}
	q.push(Out{Data: []byte("a")}) // started by the queue: nothing was due at driveHere
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("a push after driveHere started no writer")
	}

	q = newQueue(10, 1<<20)
	q.push(Out{Data: []byte("hello.ack")})
	if !q.driveHere(writer(q)) {
		t.Fatal("driveHere with a frame queued did not leave the writer to its caller")
	}
	q.push(Out{Data: []byte("status")}) // the caller's writer is due: nothing starts
	select {
	case <-started:
		t.Fatal("the queue started a writer while its caller's was due")
	default:
	}
	if buf, _ := q.next(nil); len(buf) != 2 {
		t.Fatalf("the caller's writer got %d frames, want both", len(buf))
	}
	if buf, _ := q.next(nil); len(buf) != 0 { // its turn ends
		t.Fatalf("%d frames left", len(buf))
	}
	q.push(Out{Data: []byte("later")})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("after the caller's writer ended its turn, a push started none")
	}
}
