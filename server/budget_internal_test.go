package server

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/iotest"
	"time"
)

func TestReadCappedBoundaries(t *testing.T) {
	for _, n := range []int{0, 1, 100, 64 << 10, 64<<10 + 1, 1000} {
		data := bytes.Repeat([]byte("z"), n+20)
		for _, limit := range []int64{int64(n + 20), int64(n + 19)} {
			var drawn int64
			grow := func(k int64) error { drawn += k; return nil }
			read := 0
			// A one-byte reader exercises every growth step.
			got, err := readCapped(iotest.OneByteReader(bytes.NewReader(data[20:])), data[:20], limit, grow, func(k int) { read += k })
			if limit >= int64(len(data)) {
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("n=%d limit=%d: %d bytes, %v", n, limit, len(got), err)
				}
				if int64(cap(got)) > limit+1 {
					t.Fatalf("n=%d: buffer of %d bytes for a limit of %d", n, cap(got), limit)
				}
				if drawn != int64(cap(got)) || read != n {
					t.Fatalf("n=%d: drew %d for a buffer of %d; %d bytes reported", n, drawn, cap(got), read)
				}
			} else if !errors.Is(err, errTooBig) {
				t.Fatalf("n=%d limit=%d: %d bytes, %v; want too big", n, limit, len(got), err)
			}
		}
	}
}

// The oldest frame may draw on the whole budget; the others leave it
// room to finish; one key's frames together draw at most their share;
// a release wakes who can go on, and a waiter that gives up is forgotten.
func TestBudgetSteps(t *testing.T) {
	ctx := context.Background()
	b := newBudget(100, 40, time.Minute) // share: 40
	head, next, same := b.hold("a"), b.hold("b"), b.hold("b")
	if err := head.acquire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// next may draw while 40-10 = 30 stays free: 60 of the 90 left.
	if err := next.acquire(ctx, 40); err != nil {
		t.Fatal(err)
	}
	// Its key's share is 40: same must wait, though 50 are free.
	got := make(chan error, 2)
	go func() { got <- same.acquire(ctx, 5) }()
	waitWaiting(t, b, 1)
	// The head can always finish: up to its frame limit, and beyond it
	// to the whole budget.
	if err := head.acquire(ctx, 30); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { got <- next.acquire(cctx, 25) }() // 20 are free
	waitWaiting(t, b, 2)
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled draw: %v", err)
	}
	waitWaiting(t, b, 1)
	next.release() // b's share is free again
	if err := <-got; err != nil {
		t.Fatalf("same's draw: %v", err)
	}
	head.release()
	same.release()
	if used, w := b.state(); used != 0 || w != 0 {
		t.Fatalf("used %d, %d waiting", used, w)
	}
}

// With the head holding little, the others leave it the room of a whole
// frame: the budget cannot be spent by frames that then all wait.
func TestBudgetKeepsTheHeadsRoom(t *testing.T) {
	ctx := context.Background()
	b := newBudget(100, 40, time.Minute)
	head, other := b.hold("a"), b.hold("b")
	if err := head.acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := other.acquire(ctx, 40); err != nil { // 59 left, 39 needed by the head
		t.Fatal(err)
	}
	third := b.hold("c")
	got := make(chan error, 1)
	go func() { got <- third.acquire(ctx, 30) }() // would leave 29 < 39
	waitWaiting(t, b, 1)
	if err := head.acquire(ctx, 39); err != nil {
		t.Fatalf("the head, to its limit: %v", err)
	}
	head.release() // other is the head now; third fits
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	other.release()
	third.release()
	if used, w := b.state(); used != 0 || w != 0 {
		t.Fatalf("used %d, %d waiting", used, w)
	}
}

func waitWaiting(t *testing.T, b *budget, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, w := b.state(); w == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %d waiting", n)
		}
		time.Sleep(time.Millisecond)
	}
}
