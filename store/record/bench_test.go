package record

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The commit path encodes every durable event once. json.Marshal of the
// core type is what the outbox did before records: the v1 sub-benchmarks
// are compared with it in one run.
var benchEvents = []string{"event_message.json", "event_message_stop.json", "event_agent_idle.json"}

func BenchmarkEncodeEvent(b *testing.B) {
	for _, name := range benchEvents {
		ev := goldenEvents[name]
		b.Run(name+"/v1", func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				out, err := EncodeEvent(ev)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n), "bytes/body")
		})
		b.Run(name+"/core-json", func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				out, err := json.Marshal(ev)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n), "bytes/body")
		})
	}
}

// A sync replay decodes what the replay cache no longer holds.
func BenchmarkDecodeEvent(b *testing.B) {
	for _, name := range benchEvents {
		for _, dir := range []string{"v1", "v0"} {
			body, err := os.ReadFile(filepath.Join("testdata", dir, name))
			if err != nil {
				b.Fatal(err)
			}
			b.Run(name+"/"+dir, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := DecodeEvent(body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
