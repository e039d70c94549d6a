package hub

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// frames drains what is queued now, without waiting (as a writer's turn).
func frames(t *testing.T, q *queue) []string {
	t.Helper()
	got, err := q.next(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := make([]string, len(got))
	for i, o := range got {
		s[i] = string(o.Data)
	}
	return s
}

// A stream's first update goes at once; the updates that follow within its
// interval wait, each replacing the last, and the newest is queued right
// before the next frame without a key (the terminal one), which is never
// held back or dropped.
func TestPaceFirstAtOnceLatestBeforeTerminal(t *testing.T) {
	q := newQueue(100, 1<<20)
	stopped := time.Now()
	q.now = func() time.Time { return stopped } // no interval ever ends
	q.push(Out{Data: []byte("start")})
	q.push(Out{Data: []byte("u1"), Key: "m1"})
	if got := fmt.Sprint(frames(t, q)); got != "[start u1]" {
		t.Fatalf("first update: %s, want it queued at once", got)
	}
	for i := 2; i <= 50; i++ {
		q.push(Out{Data: fmt.Appendf(nil, "u%d", i), Key: "m1"})
	}
	q.mu.Lock()
	queued, held := len(q.items), q.held
	q.mu.Unlock()
	if queued != 0 || held != 1 {
		t.Fatalf("49 updates after the first: %d queued, %d held; want the newest held", queued, held)
	}
	q.push(Out{Data: []byte("stop")})
	q.push(Out{Data: []byte("idle")})
	got := frames(t, q)
	if fmt.Sprint(got) != "[u50 stop idle]" {
		t.Fatalf("at the terminal frame: %v, want [u50 stop idle]", got)
	}
	if q.held != 0 || q.bytes != 0 || q.size != 0 {
		t.Fatalf("after the drain: %d held, %d bytes charged, %d size", q.held, q.bytes, q.size)
	}
	q.close(ErrClosed)
}

// A held update is sent by the timer when no other frame comes: a stream
// that pauses still shows its newest text.
func TestPaceTimerSendsHeldUpdate(t *testing.T) {
	q := newQueue(100, 1<<20)
	q.push(Out{Data: []byte("u1"), Key: "m1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, _ := q.take(ctx, nil); len(got) != 1 {
		t.Fatalf("first: %d frames", len(got))
	}
	q.push(Out{Data: []byte("u2"), Key: "m1"})
	q.push(Out{Data: []byte("u3"), Key: "m1"})
	got, err := q.take(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// u2 may have gone at once on a slow machine, never after u3.
	last := string(got[len(got)-1].Data)
	if last != "u3" {
		t.Fatalf("the timer queued %q, want the newest, u3", last)
	}
	q.close(ErrClosed)
}

// Lanes are paced apart; other keys do not wait for one that is held.
func TestPaceLanesApart(t *testing.T) {
	q := newQueue(100, 1<<20)
	stopped := time.Now()
	q.now = func() time.Time { return stopped }
	q.push(Out{Data: []byte("a1"), Key: "a"})
	q.push(Out{Data: []byte("a2"), Key: "a"}) // in the queue still: replaces a1
	q.push(Out{Data: []byte("b1"), Key: "b"})
	if got := fmt.Sprint(frames(t, q)); got != "[a2 b1]" {
		t.Fatalf("got %s", got)
	}
	q.push(Out{Data: []byte("a3"), Key: "a"})
	q.push(Out{Data: []byte("c1"), Key: "c"})
	if got := fmt.Sprint(frames(t, q)); got != "[c1]" {
		t.Fatalf("got %s, want c1 alone (a3 held, c1 not waiting behind it)", got)
	}
	q.push(Out{Data: []byte("end")})
	if got := fmt.Sprint(frames(t, q)); got != "[a3 end]" {
		t.Fatalf("got %s, want [a3 end]", got)
	}
	q.close(ErrClosed)
}

// An idle queue forgets its lanes once their intervals are over, and a
// closed one holds nothing.
func TestPaceForgetsLanes(t *testing.T) {
	q := newQueue(100, 1<<20)
	q.push(Out{Data: []byte("u1"), Key: "m1"})
	frames(t, q)
	for _, l := range q.lanes {
		l.last = time.Now().Add(-paceForget) // as if it were long ago
	}
	frames(t, q) // the writer finds nothing: idle
	if q.lanes != nil {
		t.Fatalf("idle queue keeps %d lanes", len(q.lanes))
	}
	q.push(Out{Data: []byte("v1"), Key: "m2"})
	q.push(Out{Data: []byte("v2"), Key: "m2"})
	frames(t, q)
	q.push(Out{Data: []byte("v3"), Key: "m2"})
	q.close(ErrSlow)
	if q.lanes != nil || q.held != 0 {
		t.Fatalf("closed queue holds %d frames", q.held)
	}
}

// stream pushes a reply growing by piece bytes every gap on a stopped
// clock, each as an update frame carrying the whole text so far, then the
// terminal frame; after each step it runs what the pace timer would and
// drains like a writer. It returns what left, in order.
func stream(t *testing.T, q *queue, pieces, piece int, gap time.Duration) (sent []string) {
	t.Helper()
	clock := time.Unix(1_000_000, 0)
	q.now = func() time.Time { return clock }
	text := ""
	for i := range pieces {
		text += fmt.Sprintf("%0*d", piece, i%10)
		q.push(Out{Data: []byte(text), Key: "m1"})
		clock = clock.Add(gap)
		q.paced()
		sent = append(sent, frames(t, q)...)
	}
	q.push(Out{Data: []byte("stop:" + text)})
	sent = append(sent, frames(t, q)...)
	return sent
}

func bytesOf(frames []string) (n int) {
	for _, f := range frames {
		n += len(f)
	}
	return n
}

// Pacing by bytes: a reply streamed slowly (a model's 300 B/s, 8 bytes a
// piece) costs about PaceGrowth+1 times its final size in updates, where
// pacing by time alone sent it some hundred times over; the first update
// goes at once, the final text arrives whole after the newest update.
func TestPaceByBytesBoundsASlowStream(t *testing.T) {
	q := newQueue(1<<20, 1<<30)
	const pieces, piece = 1500, 8 // 12,000 bytes
	gap := time.Second * piece / 300
	sent := stream(t, q, pieces, piece, gap)
	final := pieces * piece
	if len(sent[0]) != piece {
		t.Fatalf("first frame sent is %d bytes, want the first piece at once", len(sent[0]))
	}
	last := sent[len(sent)-1]
	if want := "stop:" + sent[len(sent)-2]; last != want || len(sent[len(sent)-2]) != final {
		t.Fatalf("the terminal frame does not follow the newest, whole update (%d bytes, want %d)", len(sent[len(sent)-2]), final)
	}
	updates := bytesOf(sent[:len(sent)-1])
	if bound := (PaceGrowth + 2) * final; updates > bound {
		t.Fatalf("%d updates of %d bytes for a %d-byte reply: %.1fx, want at most %dx", len(sent)-1, updates, final, float64(updates)/float64(final), PaceGrowth+2)
	}
	t.Logf("%d updates, %.1fx the reply", len(sent)-1, float64(updates)/float64(final))

	// A connection given a smaller growth (compressed frames) resends
	// less, within what the longest gap adds (TestPaceGapBoundsASlowStream).
	q2 := newQueue(1<<20, 1<<30)
	q2.growth = PaceGrowthDeflate
	sent2 := stream(t, q2, pieces, piece, gap)
	d := time.Duration(final/300) * time.Second
	bound2 := float64(PaceGrowthDeflate+2) + float64(d)/float64(2*PaceGap)
	if n := bytesOf(sent2[:len(sent2)-1]); n >= updates || float64(n) > bound2*float64(final) {
		t.Fatalf("growth %d: %d bytes of updates (growth %d: %d), want fewer and at most %.1fx", PaceGrowthDeflate, n, PaceGrowth, updates, bound2)
	}
	q.close(ErrClosed)
	q2.close(ErrClosed)
}

// A held frame that has not grown enough goes once its key is quiet for
// PaceQuiet: a stream that pauses shows its newest text.
func TestPaceQuietKeySendsHeld(t *testing.T) {
	q := newQueue(100, 1<<20)
	clock := time.Unix(1_000_000, 0)
	q.now = func() time.Time { return clock }
	big := strings.Repeat("x", 4000)
	q.push(Out{Data: []byte(big), Key: "m1"})
	frames(t, q)
	clock = clock.Add(time.Second)
	q.push(Out{Data: []byte(big + "y"), Key: "m1"}) // grown by far less than 1/20
	q.paced()
	if got := frames(t, q); len(got) != 0 {
		t.Fatalf("a frame grown by one byte left after 1s: %d frames", len(got))
	}
	clock = clock.Add(PaceQuiet)
	q.paced()
	if got := frames(t, q); len(got) != 1 || got[0] != big+"y" {
		t.Fatalf("after the key was quiet for %v: %d frames, want the held one", PaceQuiet, len(got))
	}
	q.close(ErrClosed)
}

// Frames that do not grow (a tool's progress line) are held to PaceRate
// bytes a second, however often they come.
func TestPaceSteadyFramesByRate(t *testing.T) {
	q := newQueue(100, 1<<20)
	clock := time.Unix(1_000_000, 0)
	q.now = func() time.Time { return clock }
	line := func(i int) Out { return Out{Data: fmt.Appendf(nil, "%0512d", i), Key: "p1"} }
	q.push(line(0))
	frames(t, q)
	sent := 0
	for i := 1; i <= 200; i++ { // 10 s of a line every 50 ms
		clock = clock.Add(UpdateEvery)
		q.push(line(i))
		q.paced()
		sent += len(frames(t, q))
	}
	// 512 bytes at 1 KiB/s: one every half second, 20 in 10 s.
	if want := int(10 * time.Second / (time.Second * 512 / PaceRate)); sent < want-1 || sent > want+1 {
		t.Fatalf("%d progress lines left in 10 s, want about %d", sent, want)
	}
	q.close(ErrClosed)
}

// A lane idle for paceForget is dropped by the pace timer, with the
// timer: a connection keeps nothing of a stream long over.
func TestPaceTimerForgetsIdleLanes(t *testing.T) {
	q := newQueue(100, 1<<20)
	clock := time.Unix(1_000_000, 0)
	q.now = func() time.Time { return clock }
	q.push(Out{Data: []byte("u1"), Key: "m1"})
	frames(t, q)
	frames(t, q) // idle: the lane is recent, kept, and the timer armed
	q.mu.Lock()
	kept, armed := len(q.lanes), !q.timerAt.IsZero()
	q.mu.Unlock()
	if kept != 1 || !armed {
		t.Fatalf("right after a stream: %d lanes, timer armed %v", kept, armed)
	}
	clock = clock.Add(paceForget)
	q.paced()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lanes != nil || q.timer != nil {
		t.Fatalf("%v after the stream: %d lanes, timer %v", paceForget, len(q.lanes), q.timer != nil)
	}
}

func TestPaceInterval(t *testing.T) {
	for size, want := range map[int]time.Duration{
		0: UpdateEvery, 100: UpdateEvery, PaceChunk: UpdateEvery, PaceChunk + 1: 2 * UpdateEvery, 1 << 30: PaceSpacing,
	} {
		if got := paceInterval(size); got != want {
			t.Errorf("paceInterval(%d) = %v, want %v", size, got, want)
		}
	}
}
