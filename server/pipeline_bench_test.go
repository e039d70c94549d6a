package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/server"
)

// BenchmarkPipelinedSends is one device pipelining message.send, up to
// window unanswered, into a gateway whose agent parks every turn (so a
// send commits its message, search entry, owed turn and outbox row, and
// nothing else): the sends/s one connection gets through the commit path.
// irisgate bench's ratios burst measures the same against its SQLite
// baseline, with devices watching.
func BenchmarkPipelinedSends(b *testing.B) {
	for _, window := range []int{1, 16, 64} {
		b.Run(fmt.Sprint("window=", window), func(b *testing.B) { benchPipeline(b, window) })
	}
}

func benchPipeline(b *testing.B, window int) {
	g := testgw.Start(b, parkedAgent, func(c *server.AppConfig) {
		c.Bounds = gateway.Bounds{PerToken: 1 << 20, InAll: 1 << 20}
	})
	// A lane queues at most 32 turns, and parked turns never leave.
	lanes := make([]string, b.N/30+1)
	for i := range lanes {
		if err := g.App.GW.CreateChannel(context.Background(), gateway.Caller{}, fmt.Sprint("lane ", i), core.KindChannel, ""); err != nil {
			b.Fatal(err)
		}
	}
	chs, err := g.App.GW.Channels(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	lanes = lanes[:0]
	for _, c := range chs {
		if c.Kind == core.KindChannel {
			lanes = append(lanes, c.ChatID)
		}
	}
	d := g.Dial(b, "phone")
	frames := make([][]byte, b.N)
	for i := range frames {
		frames[i], _ = irisv1.Marshal(irisv1.Envelope{V: irisv1.Version, ID: int64(i + 1), Type: irisv1.TypeMessageSend, ChatID: lanes[i%len(lanes)]},
			irisv1.MessageSend{Text: fmt.Sprint("bench ", i)})
	}
	slots := make(chan struct{}, window)
	read := make(chan error, 1)
	b.ResetTimer()
	// The frames are read from the connection directly: a schema check of
	// each would take the CPU the gateway is measured on. The first and
	// the last are checked.
	v := testgw.Schema(b)
	go func() {
		for n := 0; n < b.N; {
			f, ok := <-d.Events()
			if !ok {
				read <- fmt.Errorf("connection ended after %d answers", n)
				return
			}
			if f.ID > 0 {
				if n == 0 || n == b.N-1 {
					if err := v.Server(f.Raw); err != nil {
						read <- err
						return
					}
				}
				if f.Type != "message" {
					read <- fmt.Errorf("send %d answered with %s", f.ID, f.Raw)
					return
				}
				n++
				<-slots
			}
		}
		read <- nil
	}()
	ctx := context.Background()
	for _, f := range frames {
		slots <- struct{}{}
		if err := d.SendRaw(ctx, f, false); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-read; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
}
