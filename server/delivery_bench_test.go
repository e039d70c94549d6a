package server_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	dto "github.com/prometheus/client_model/go"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// BenchmarkDeliveryProofPings delivers outbox frames one at a time to 20
// devices (each frame reaches every device before the next is published,
// as in a paced fan-out) and reports the process's CPU per delivery and
// the pings sent per delivery: with a proof ping after every batch
// (ProofEvery 1 ns, what the gateway did before) and with them spaced
// (the default). Devices and gateway share the process, so the CPU
// figure is theirs together; the difference is the pings' cost.
func BenchmarkDeliveryProofPings(b *testing.B) {
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"ping-every-batch", time.Nanosecond}, {"spaced", server.DefaultProofEvery}} {
		b.Run(tc.name, func(b *testing.B) {
			g := testgw.Start(b, func(c *server.AppConfig) { c.Server.ProofEvery = tc.every })
			const devices = 20
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got atomic.Int64
			arrived := make(chan struct{}, devices)
			for i := range devices {
				ws, _, err := websocket.Dial(ctx, g.URL, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer ws.CloseNow()
				hello := fmt.Appendf(nil, `{"v":1,"id":1,"type":"hello","payload":{"token":%q,"device_id":"bench-%d","device_name":"b","caps":{"min_protocol":1}}}`, testgw.Token, i)
				if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
					b.Fatal(err)
				}
				for range 2 { // hello.ack, status
					if _, _, err := ws.Read(ctx); err != nil {
						b.Fatal(err)
					}
				}
				go func() {
					for {
						if _, _, err := ws.Read(ctx); err != nil {
							return
						}
						got.Add(1)
						arrived <- struct{}{}
					}
				}()
			}
			pings0 := pingsB(b, g)
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			for i := range b.N {
				g.App.Hub.Publish(&core.Event{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: core.DefaultChatID}, Cursor: 1_000_000_000 + int64(i), TS: 1})
				for range devices {
					select {
					case <-arrived:
					case <-time.After(testgw.Wait):
						b.Fatal("a frame did not arrive")
					}
				}
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
			n := float64(b.N * devices)
			b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/delivery")
			b.ReportMetric((pingsB(b, g)-pings0)/n, "pings/delivery")
		})
	}
}

func pingsB(b *testing.B, g *testgw.GW) float64 {
	b.Helper()
	var m dto.Metric
	if err := g.App.Metrics.Pings.Write(&m); err != nil {
		b.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
