package iris

import (
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
)

// BenchmarkFrames is the dialect's share of fanning out one event: its
// broadcast frame, encoded once (every Iris device then gets these
// bytes). A message.update of a reply 64 B and 4 KiB long, as streaming
// sends it after each token.
//
//	go test -run x -bench Frames -count 6 ./wire/iris
func BenchmarkFrames(b *testing.B) {
	lane := core.Lane{ChatID: core.DefaultChatID, ThreadID: "t_01J8ZQ4K7M3N5P"}
	for _, size := range []int{64, 4096} {
		text := strings.Repeat("All work and no play. ", size/22+1)[:size]
		b.Run(map[int]string{64: "update-64B", 4096: "update-4KiB"}[size], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ev := &core.Event{Type: core.EvMessageUpdate, Lane: lane, StreamID: "m_01J8ZQ4K7M3N5P6Q", Text: text}
				if out := (codec{}).Frames(ev, 0); len(out) != 1 {
					b.Fatal("no frame")
				}
			}
		})
	}
	// A person's message as it is echoed to their devices.
	b.Run("message-120B", func(b *testing.B) {
		b.ReportAllocs()
		text := strings.Repeat("All work and no play. ", 6)[:120]
		for b.Loop() {
			m := &core.Message{ID: "m_01J8ZQ4K7M3N5P6Q", Lane: lane, Role: core.RoleUser, Text: text, TS: 1733050000000}
			ev := &core.Event{Type: core.EvMessage, Lane: lane, Message: m}
			if out := (codec{}).Frames(ev, 0); len(out) != 1 {
				b.Fatal("no frame")
			}
		}
	})
	// One update to 100 Iris devices: what a fan-out costs per event,
	// encoding and every device's Frames (allocs/op per event: the
	// deliveries themselves should allocate nothing).
	b.Run("update-64B-to-100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev := &core.Event{Type: core.EvMessageUpdate, Lane: lane, StreamID: "m_01J8ZQ4K7M3N5P6Q", Text: "All work and no play."}
			for range 100 {
				if out := (codec{}).Frames(ev, 0); len(out) != 1 || out[0].Key == "" {
					b.Fatal("no keyed frame")
				}
			}
		}
	})
}
