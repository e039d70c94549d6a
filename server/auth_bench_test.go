package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/internal/testgw"
)

// BenchmarkHelloDuringFlood measures a valid device's hello (dial, hello,
// hello.ack) while strangers flood the gateway with wrong tokens from the
// same address, as everyone behind one NAT or one reverse proxy shares
// one. It reports the hello's p50 and p99 and the share of valid hellos
// refused (on main every one was refused after the flood's tenth
// failure), and how many bad hellos per second the flood got answered.
//
//	go test ./server -run '^$' -bench HelloDuringFlood -benchtime 200x
func BenchmarkHelloDuringFlood(b *testing.B) {
	for _, flooders := range []int{0, 16} {
		b.Run(fmt.Sprintf("flooders=%d", flooders), func(b *testing.B) {
			g := testgw.Start(b)
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var bad atomic.Int64
			for i := range flooders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ctx.Err() == nil; n++ {
						if _, ok := benchHello(ctx, g.URL, fmt.Sprintf("guess-%d-%d", i, n), "stranger"); ok == nil {
							bad.Add(1)
						}
					}
				}()
			}
			// Let the flood pass the free failures first.
			for deadline := time.Now().Add(10 * time.Second); flooders > 0 && bad.Load() < 20 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			floodStart, badStart := time.Now(), bad.Load()
			lat := make([]time.Duration, 0, b.N)
			refused := 0
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				typ, err := benchHello(context.Background(), g.URL, testgw.Token, fmt.Sprint("owner-", i))
				if err != nil || typ != "hello.ack" {
					refused++
					continue
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			rate := float64(bad.Load()-badStart) / time.Since(floodStart).Seconds()
			stop()
			wg.Wait()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
			b.ReportMetric(float64(refused)/float64(b.N)*100, "%refused")
			b.ReportMetric(rate, "bad-hellos/s")
		})
	}
}

// benchHello dials, says an Iris hello and returns the first frame's type
// (err is nil once a first frame came, whatever it was).
func benchHello(ctx context.Context, url, token, device string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return "", err
	}
	defer ws.CloseNow()
	hello, _ := json.Marshal(map[string]any{"v": 1, "id": 1, "type": "hello", "payload": map[string]any{"token": token, "device_id": device}})
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		return "", err
	}
	_, data, err := ws.Read(ctx)
	if err != nil {
		return "", err
	}
	var f struct{ Type string }
	json.Unmarshal(data, &f)
	return f.Type, nil
}
