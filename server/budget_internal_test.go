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
			// A one-byte reader exercises every growth step.
			got, err := readCapped(iotest.OneByteReader(bytes.NewReader(data[20:])), data[:20], limit)
			if limit >= int64(len(data)) {
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("n=%d limit=%d: %d bytes, %v", n, limit, len(got), err)
				}
				if int64(cap(got)) > limit+1 {
					t.Fatalf("n=%d: buffer of %d bytes for a limit of %d", n, cap(got), limit)
				}
			} else if !errors.Is(err, errTooBig) {
				t.Fatalf("n=%d limit=%d: %d bytes, %v; want too big", n, limit, len(got), err)
			}
		}
	}
}

// The budget serves waiters in order, all or nothing, and a waiter that
// gives up lets the next one in.
func TestBudgetOrder(t *testing.T) {
	b := newBudget(10)
	ctx := context.Background()
	if err := b.acquire(ctx, 8); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 3)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		if b.acquire(cctx, 5) != nil {
			got <- -5
		}
	}()
	waitWaiting(t, b, 1)
	go func() { b.acquire(ctx, 2); got <- 2 }() // fits, but waits its turn
	waitWaiting(t, b, 2)
	select {
	case n := <-got:
		t.Fatalf("%d jumped the queue", n)
	default:
	}
	cancel()
	if n := <-got; n != -5 {
		t.Fatalf("got %d, want the cancelled waiter", n)
	}
	if n := <-got; n != 2 {
		t.Fatalf("got %d, want the next waiter", n)
	}
	b.release(8)
	b.release(2)
	if used, w := b.state(10); used != 0 || w != 0 {
		t.Fatalf("used %d, %d waiting", used, w)
	}
}

func waitWaiting(t *testing.T, b *budget, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, w := b.state(0); w == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %d waiting", n)
		}
		time.Sleep(time.Millisecond)
	}
}
