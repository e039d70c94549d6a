package hub

import (
	"bytes"
	"compress/flate"
	"strings"
	"testing"
	"time"
)

// prose is n bytes of English-like text (words of a small vocabulary drawn
// by a fixed generator, as bench's replyText), which compresses about as a
// model's reply does.
func prose(n int) string {
	words := strings.Fields(`the a of to and in is that for it with as was on be by this are or
		from at an but not have which they you one all we can their has been more if will would
		there what when so no about up out into than them then these some its only other time
		gateway device message stream reply token socket commit frame latency durable agent`)
	var b strings.Builder
	x := uint32(2463534242)
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteString(words[x%uint32(len(words))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// deflatedSize is what a frame costs compressed on its own, as
// permessage-deflate without context takeover sends it (coder/websocket
// compresses at flate.BestSpeed).
func deflatedSize(t *testing.T, s string) int {
	t.Helper()
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(s))
	w.Flush()
	return buf.Len() - 4 // RFC 7692 drops the flush's 00 00 ff ff
}

// sentAt is a frame that left and when, on the stopped clock.
type sentAt struct {
	data string
	at   time.Time
}

// streamText pushes text piece bytes at a time, one piece every gap on a
// stopped clock (each an update carrying the text so far), then the
// terminal frame; after each step it runs what the pace timer would and
// drains as a writer does.
func streamText(t *testing.T, q *queue, text string, piece int, gap time.Duration) []sentAt {
	t.Helper()
	clock := time.Unix(1_000_000, 0)
	q.now = func() time.Time { return clock }
	var sent []sentAt
	drain := func() {
		for _, f := range frames(t, q) {
			sent = append(sent, sentAt{f, clock})
		}
	}
	for i := piece; i <= len(text); i += piece {
		q.push(Out{Data: []byte(text[:i]), Key: "m1"})
		drain() // the first update goes at once
		clock = clock.Add(gap)
		q.paced()
		drain()
	}
	q.push(Out{Data: []byte("stop:" + text)})
	drain()
	return sent
}

// The longest gap: a reply streamed at a model's 300 B/s moves on every
// device at least every PaceGap, however large it has grown, where pacing
// by bytes alone left a deflate connection's 12 KB reply still for 7.8 s
// near its end. The first update goes at once and the terminal frame
// follows the whole text. The cost on the wire is bounded by what the gap
// adds (one resend of the text per PaceGap), and logged with deflate as
// it would be compressed.
func TestPaceGapBoundsASlowStream(t *testing.T) {
	const piece, rate = 8, 300 // bytes, bytes a second
	text := prose(12_000)
	gap := time.Second * piece / rate
	for _, growth := range []int{PaceGrowth, PaceGrowthDeflate} {
		q := newQueue(1<<20, 1<<30)
		q.growth = growth
		sent := streamText(t, q, text, piece, gap)
		q.close(ErrClosed)
		start := time.Unix(1_000_000, 0)
		if sent[0].data != text[:piece] || !sent[0].at.Equal(start) {
			t.Fatalf("growth %d: first frame %q at %v, want the first piece at once", growth, sent[0].data, sent[0].at.Sub(start))
		}
		stop := sent[len(sent)-1]
		if stop.data != "stop:"+text || sent[len(sent)-2].data != text {
			t.Fatalf("growth %d: the terminal frame does not follow the whole text", growth)
		}
		updates := sent[:len(sent)-1]
		raw, z := 0, 0
		var longest time.Duration
		for i, s := range updates {
			raw += len(s.data)
			z += deflatedSize(t, s.data)
			if i > 0 {
				longest = max(longest, s.at.Sub(updates[i-1].at))
			}
		}
		// The pace timer runs once a piece here: a frame due in between
		// leaves at the next piece.
		if longest > PaceGap+gap {
			t.Errorf("growth %d: the reply stood still for %v, want at most %v", growth, longest, PaceGap)
		}
		// By bytes a stream costs about growth+1 times its text; the gap
		// adds at most one resend per PaceGap, half the text on average.
		d := time.Duration(len(text)/rate) * time.Second
		bound := float64(growth+2) + float64(d)/float64(2*PaceGap)
		ratio := float64(raw) / float64(len(text))
		if ratio > bound {
			t.Errorf("growth %d: %.1fx the reply in updates, want at most %.1fx", growth, ratio, bound)
		}
		t.Logf("growth %d: %d updates, %.1fx the reply (%.2fx deflated), at most %v apart", growth, len(updates), ratio, float64(z)/float64(len(text)), longest)
	}
}

// A frame that has not grown (a tool's progress line rewritten in place)
// is not hurried by the gap: it keeps to PaceRate.
func TestPaceGapLeavesSteadyFramesAlone(t *testing.T) {
	q := newQueue(100, 1<<20)
	clock := time.Unix(1_000_000, 0)
	q.now = func() time.Time { return clock }
	line := strings.Repeat("x", 4096) // 4 s a line at PaceRate
	q.push(Out{Data: []byte(line), Key: "p1"})
	frames(t, q)
	// A new line every UpdateEvery for twice the gap: the key is never
	// quiet, and a 4 KiB line is due only after 4 s.
	for i := range int(2 * PaceGap / UpdateEvery) {
		clock = clock.Add(UpdateEvery)
		q.push(Out{Data: []byte(strings.Repeat(string(rune('a'+i%26)), len(line))), Key: "p1"})
		q.paced()
		if got := frames(t, q); len(got) != 0 {
			t.Fatalf("a line of the same size left %v after the last: %d frames", clock.Sub(time.Unix(1_000_000, 0)), len(got))
		}
	}
	q.close(ErrClosed)
}
