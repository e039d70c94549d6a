package hub

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// frames drains what is queued now, without waiting (as a writer's turn).
func frames(t *testing.T, q *queue) []string {
	t.Helper()
	got, err := q.next(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := make([]string, len(got))
	for i, o := range got {
		s[i] = string(o.Data)
	}
	return s
}

// A stream's first update goes at once; the updates that follow within its
// interval wait, each replacing the last, and the newest is queued right
// before the next frame without a key (the terminal one), which is never
// held back or dropped.
func TestPaceFirstAtOnceLatestBeforeTerminal(t *testing.T) {
	q := newQueue(100, 1<<20)
	stopped := time.Now()
	q.now = func() time.Time { return stopped } // no interval ever ends
	q.push(Out{Data: []byte("start")})
	q.push(Out{Data: []byte("u1"), Key: "m1"})
	if got := fmt.Sprint(frames(t, q)); got != "[start u1]" {
		t.Fatalf("first update: %s, want it queued at once", got)
	}
	for i := 2; i <= 50; i++ {
		q.push(Out{Data: fmt.Appendf(nil, "u%d", i), Key: "m1"})
	}
	q.mu.Lock()
	queued, held := len(q.items), q.held
	q.mu.Unlock()
	if queued != 0 || held != 1 {
		t.Fatalf("49 updates after the first: %d queued, %d held; want the newest held", queued, held)
	}
	q.push(Out{Data: []byte("stop")})
	q.push(Out{Data: []byte("idle")})
	got := frames(t, q)
	if fmt.Sprint(got) != "[u50 stop idle]" {
		t.Fatalf("at the terminal frame: %v, want [u50 stop idle]", got)
	}
	if q.held != 0 || q.bytes != 0 || q.size != 0 {
		t.Fatalf("after the drain: %d held, %d bytes charged, %d size", q.held, q.bytes, q.size)
	}
	q.close(ErrClosed)
}

// A held update is sent by the timer when no other frame comes: a stream
// that pauses still shows its newest text.
func TestPaceTimerSendsHeldUpdate(t *testing.T) {
	q := newQueue(100, 1<<20)
	q.push(Out{Data: []byte("u1"), Key: "m1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, _ := q.take(ctx, nil); len(got) != 1 {
		t.Fatalf("first: %d frames", len(got))
	}
	q.push(Out{Data: []byte("u2"), Key: "m1"})
	q.push(Out{Data: []byte("u3"), Key: "m1"})
	got, err := q.take(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// u2 may have gone at once on a slow machine, never after u3.
	last := string(got[len(got)-1].Data)
	if last != "u3" {
		t.Fatalf("the timer queued %q, want the newest, u3", last)
	}
	q.close(ErrClosed)
}

// Lanes are paced apart; other keys do not wait for one that is held.
func TestPaceLanesApart(t *testing.T) {
	q := newQueue(100, 1<<20)
	stopped := time.Now()
	q.now = func() time.Time { return stopped }
	q.push(Out{Data: []byte("a1"), Key: "a"})
	q.push(Out{Data: []byte("a2"), Key: "a"}) // in the queue still: replaces a1
	q.push(Out{Data: []byte("b1"), Key: "b"})
	if got := fmt.Sprint(frames(t, q)); got != "[a2 b1]" {
		t.Fatalf("got %s", got)
	}
	q.push(Out{Data: []byte("a3"), Key: "a"})
	q.push(Out{Data: []byte("c1"), Key: "c"})
	if got := fmt.Sprint(frames(t, q)); got != "[c1]" {
		t.Fatalf("got %s, want c1 alone (a3 held, c1 not waiting behind it)", got)
	}
	q.push(Out{Data: []byte("end")})
	if got := fmt.Sprint(frames(t, q)); got != "[a3 end]" {
		t.Fatalf("got %s, want [a3 end]", got)
	}
	q.close(ErrClosed)
}

// An idle queue forgets its lanes once their intervals are over, and a
// closed one holds nothing.
func TestPaceForgetsLanes(t *testing.T) {
	q := newQueue(100, 1<<20)
	q.push(Out{Data: []byte("u1"), Key: "m1"})
	frames(t, q)
	for _, l := range q.lanes {
		l.due = time.Now().Add(-time.Millisecond) // as if the interval passed
	}
	frames(t, q) // the writer finds nothing: idle
	if q.lanes != nil {
		t.Fatalf("idle queue keeps %d lanes", len(q.lanes))
	}
	q.push(Out{Data: []byte("v1"), Key: "m2"})
	q.push(Out{Data: []byte("v2"), Key: "m2"})
	frames(t, q)
	q.push(Out{Data: []byte("v3"), Key: "m2"})
	q.close(ErrSlow)
	if q.lanes != nil || q.held != 0 {
		t.Fatalf("closed queue holds %d frames", q.held)
	}
}

func TestPaceInterval(t *testing.T) {
	for size, want := range map[int]time.Duration{
		0: UpdateEvery, 100: UpdateEvery, PaceChunk: UpdateEvery, PaceChunk + 1: 2 * UpdateEvery, 1 << 30: PaceMax,
	} {
		if got := paceInterval(size); got != want {
			t.Errorf("paceInterval(%d) = %v, want %v", size, got, want)
		}
	}
}
