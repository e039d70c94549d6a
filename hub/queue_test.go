package hub

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestQueueCoalescesOnlyKeyedFrames(t *testing.T) {
	q := newQueue(10, 1<<20)
	q.push(Out{Data: []byte("start")})
	q.push(Out{Data: []byte("u1"), Key: "m1"})
	q.push(Out{Data: []byte("tool.end")})
	q.push(Out{Data: []byte("u2"), Key: "m1"})
	q.push(Out{Data: []byte("u3"), Key: "m1"})
	got, err := q.take(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start", "u3", "tool.end"}
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %v", len(got), want)
	}
	for i, w := range want {
		if string(got[i].Data) != w {
			t.Fatalf("frame %d = %q, want %q", i, got[i].Data, w)
		}
	}
	// Once taken, a key starts afresh.
	q.push(Out{Data: []byte("u4"), Key: "m1"})
	got, _ = q.take(context.Background(), got)
	if len(got) != 1 || string(got[0].Data) != "u4" {
		t.Fatalf("after take: %d frames", len(got))
	}
}

func TestQueueOverflowClosesAndDrops(t *testing.T) {
	q := newQueue(3, 1<<20)
	for i := 0; i < 3; i++ {
		if !q.push(Out{Data: []byte("x")}) {
			t.Fatal("push refused below the cap")
		}
	}
	if q.push(Out{Data: []byte("x")}) {
		t.Fatal("push past the cap accepted")
	}
	if !errors.Is(q.err(), ErrSlow) {
		t.Fatalf("err = %v", q.err())
	}
	got, err := q.take(context.Background(), nil)
	if len(got) != 0 || !errors.Is(err, ErrSlow) {
		t.Fatalf("take after overflow = %d frames, %v", len(got), err)
	}
}

func TestQueueByteCap(t *testing.T) {
	q := newQueue(100, 100)
	for i := range 5 {
		if !q.push(Out{Data: make([]byte, 20)}) {
			t.Fatalf("push %d refused", i+1)
		}
	}
	if q.push(Out{Data: make([]byte, 20)}) {
		t.Fatal("push past the byte cap accepted")
	}
}

func TestQueuePushWaitFlowsAtReaderPace(t *testing.T) {
	q := newQueue(8, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 1000
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := q.pushWait(ctx, Out{Data: []byte{byte(i)}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var buf []Out
	got := 0
	for got < n {
		var err error
		buf, err = q.take(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range buf {
			if o.Data[0] != byte(got) {
				t.Fatalf("frame %d out of order", got)
			}
			got++
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if q.err() != nil {
		t.Fatalf("replay overflowed the queue: %v", q.err())
	}
}

func TestQueueCloseDrainsGracefully(t *testing.T) {
	q := newQueue(10, 1<<20)
	q.push(Out{Data: []byte("bye")})
	q.close(ErrClosed)
	got, err := q.take(context.Background(), nil)
	if len(got) != 1 || err != nil {
		t.Fatalf("first take = %d frames, %v", len(got), err)
	}
	if _, err := q.take(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("second take err = %v", err)
	}
}

func TestQueuePushFront(t *testing.T) {
	q := newQueue(10, 1<<20)
	q.push(Out{Data: []byte("u1"), Key: "k"})
	q.pushFront(Out{Data: []byte("ack")})
	q.push(Out{Data: []byte("u2"), Key: "k"})
	got, _ := q.take(context.Background(), nil)
	if len(got) != 2 || string(got[0].Data) != "ack" || string(got[1].Data) != "u2" {
		t.Fatalf("got %d frames", len(got))
	}
}

// The byte budget bounds the backlog, not one frame: a frame larger than
// the whole budget is queued (live and by a replay) and delivered; only a
// pile of large frames overflows. Each is charged a quarter of the budget.
func TestQueueTakesOneFrameLargerThanItsBudget(t *testing.T) {
	q := newQueue(100, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !q.push(Out{Data: make([]byte, 1000)}) {
		t.Fatal("a frame of 10x the budget closed the queue")
	}
	if !q.push(Out{Data: make([]byte, 10)}) {
		t.Fatal("a small frame behind the large one closed the queue")
	}
	if got, _ := q.take(ctx, nil); len(got) != 2 || len(got[0].Data) != 1000 {
		t.Fatalf("took %d frames", len(got))
	}
	if err := q.pushWait(ctx, Out{Data: make([]byte, 500)}); err != nil {
		t.Fatalf("replaying a large frame: %v", err)
	}
	if got, _ := q.take(ctx, nil); len(got) != 1 || len(got[0].Data) != 500 {
		t.Fatalf("took %d frames", len(got))
	}
	for i := range 4 {
		if !q.push(Out{Data: make([]byte, 1000)}) {
			t.Fatalf("large frame %d of 4 closed the queue", i+1)
		}
	}
	if q.push(Out{Data: make([]byte, 1000)}) {
		t.Fatal("a fifth large frame waiting fit in the budget")
	}
	if !errors.Is(q.err(), ErrSlow) {
		t.Fatalf("closed with %v", q.err())
	}
}

// A queue borrows its array while frames flow and gives it back when its
// writer finds nothing to do: an idle connection holds none, and the next
// burst's queue gets one that has room already.
func TestQueueGivesItsArrayBackWhenIdle(t *testing.T) {
	q := newQueue(100, 1<<20)
	q.drive(func() {})
	for i := range 40 {
		q.push(Out{Data: []byte{byte(i)}})
	}
	if buf, _ := q.next(nil); len(buf) != 40 {
		t.Fatalf("took %d frames, want 40", len(buf))
	}
	if buf, _ := q.next(nil); len(buf) != 0 {
		t.Fatalf("%d frames left", len(buf))
	}
	if q.items != nil || q.box != nil {
		t.Fatalf("an idle queue holds an array of %d", cap(q.items))
	}
	q.push(Out{Data: []byte("again")})
	if buf, _ := q.next(nil); len(buf) != 1 || string(buf[0].Data) != "again" {
		t.Fatalf("after going idle the queue gave %v", buf)
	}
}

// pushEvent queues every frame of an event under its cursor, once: a
// second delivery of the cursor (a sync got there first) adds nothing.
func TestQueuePushEventOnce(t *testing.T) {
	q := newQueue(100, 1<<20)
	frames := []Out{{Data: []byte("edit")}, {Data: []byte("done")}}
	if !q.pushEvent(frames, 9) || !q.pushEvent(frames, 9) {
		t.Fatal("pushEvent on an open queue reported it closed")
	}
	buf, _ := q.take(t.Context(), nil)
	if len(buf) != 2 || buf[0].Cursor != 9 || buf[1].Cursor != 9 || string(buf[1].Data) != "done" {
		t.Fatalf("queued %+v, want both frames once at cursor 9", buf)
	}
	q.close(ErrSlow)
	if q.pushEvent([]Out{{Data: []byte("late")}}, 10) {
		t.Fatal("pushEvent on a closed queue reported it open")
	}
}
