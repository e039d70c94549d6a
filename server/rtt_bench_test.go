package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
)

// BenchmarkRoundTrip is one device's requests answered one at a time over
// a real loopback WebSocket, as irisgate bench's request round trips time
// them against Centrifugo: ping (the least a request costs: the read loop,
// the handler, the writer) and history of 10. It reports the p50.
//
//	go test ./server -run '^$' -bench RoundTrip -benchtime 5000x
func BenchmarkRoundTrip(b *testing.B) {
	for _, c := range []struct{ name, typ, payload, want string }{
		{"ping", "ping", `{"ts":1}`, `"type":"pong"`},
		{"history-10", "history", `{"limit":10}`, `"type":"history"`},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := testgw.Start(b, parkedAgent)
			if c.typ == "history" {
				d := g.Dial(b, "writer")
				for i := range 12 {
					d.MustDo("message.send", client.Lane{}, map[string]any{"text": fmt.Sprint("message ", i)})
				}
			}
			ctx := context.Background()
			ws, _, err := websocket.Dial(ctx, g.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer ws.CloseNow()
			hello, _ := json.Marshal(map[string]any{"v": 1, "id": 1, "type": "hello", "payload": map[string]any{"token": testgw.Token, "device_id": "rtt"}})
			if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
				b.Fatal(err)
			}
			if _, f, err := ws.Read(ctx); err != nil || !bytes.Contains(f, []byte(`"hello.ack"`)) {
				b.Fatalf("hello: %s %v", f, err)
			}
			chat := ""
			if c.typ == "history" {
				chat = `,"chat_id":"` + core.DefaultChatID + `"`
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprint(i + 2)
				req := []byte(`{"v":1,"id":` + id + `,"type":"` + c.typ + `"` + chat + `,"payload":` + c.payload + `}`)
				t := time.Now()
				if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
					b.Fatal(err)
				}
				for {
					_, f, err := ws.Read(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if bytes.Contains(f, []byte(`"id":`+id+`,`)) {
						if !bytes.Contains(f, []byte(c.want)) {
							b.Fatalf("request %s answered with %s", id, f)
						}
						break
					}
				}
				lat = append(lat, time.Since(t))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
		})
	}
}

// BenchmarkHello is a new device's handshake (dial, hello, hello.ack), one
// after another, with the gateway's fixed token and with a stored one
// (whose use the hello records, at most every gateway.TouchEvery).
//
//	go test ./server -run '^$' -bench 'Hello$' -benchtime 2000x
func BenchmarkHello(b *testing.B) {
	for _, stored := range []bool{false, true} {
		name := "fixed-token"
		if stored {
			name = "stored-token"
		}
		b.Run(name, func(b *testing.B) {
			g := testgw.Start(b)
			tok := testgw.Token
			if stored {
				var err error
				if tok, _, err = gateway.CreateToken(context.Background(), g.App.Store, "bench", ""); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				t := time.Now()
				if typ, err := benchHello(context.Background(), g.URL, tok, fmt.Sprint("hs-", i)); err != nil || typ != "hello.ack" {
					b.Fatalf("hello %d: %s %v", i, typ, err)
				}
				lat = append(lat, time.Since(t))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
		})
	}
}
