package hub_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// sharedFrame gives every connection the same shared frame, as the Iris
// codec does for a broadcast.
type sharedFrame struct{ out []hub.Out }

func (f sharedFrame) Frames(*core.Event, int64) []hub.Out { return f.out }

// BenchmarkPublishFanout is the hub's share of a fan-out burst: one
// publish queued on 100 connections, whose writers (goroutines started by
// Drive, as the server's are) drain them with Next. Per op: one publish,
// 100 deliveries. allocs/op is the number to watch: a writer catches up
// after nearly every frame, so whatever a queue allocates when it starts
// again is paid per delivery.
func BenchmarkPublishFanout(b *testing.B) {
	const devices = 100
	ctx := context.Background()
	ps := &countingProofs{sets: map[string][]core.CursorRange{}}
	h := hub.New(ps, slog.New(slog.NewTextHandler(io.Discard, nil)), hub.DefaultLimits)
	codec := sharedFrame{out: []hub.Out{{Data: make([]byte, 300)}}}
	var delivered, running atomic.Int64
	want := int64(-1)
	all := make(chan struct{})
	conns := make([]*hub.Conn, devices)
	for i := range conns {
		c, _, err := h.Add(ctx, "d"+strconv.Itoa(i), codec, nil)
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
		c.Drive(func() {
			running.Add(1)
			defer running.Add(-1)
			var buf []hub.Out
			for {
				var err error
				buf, err = c.Next(buf)
				if n := delivered.Add(int64(len(buf))); len(buf) > 0 && n == atomic.LoadInt64(&want) {
					close(all)
				}
				clear(buf)
				if len(buf) == 0 || err != nil {
					return
				}
			}
		})
	}
	atomic.StoreInt64(&want, int64(b.N)*devices)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h.Publish(&core.Event{Type: core.EvMessage, Cursor: int64(i + 1)})
	}
	<-all
	b.StopTimer()
	for _, c := range conns {
		h.Remove(c)
	}
	for running.Load() > 0 {
		runtime.Gosched() // the writers see their queues closed
	}
}
