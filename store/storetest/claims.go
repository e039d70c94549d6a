package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/store"
)

// claimTests hold a store's push queue to what several senders (replicas)
// need: a due push is handed to one sender until its claim ends.
var claimTests = []test{
	{"PushClaims", testPushClaims},
	{"PushClaimsOutliveTheirSender", testPushClaimExpires},
	{"PushClaimNewsWaitsForTheSend", testPushClaimNews},
	{"PushClaimsConcurrent", testPushClaimsConcurrent},
}

func claim(t *testing.T, s Store, now, until time.Time, busy ...string) []store.PushJob {
	t.Helper()
	js, err := s.ClaimPushes(bg, now, until, 100, 100, busy)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func bodies(js []store.PushJob) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.DeviceID+":"+j.Body)
	}
	return out
}

// A claimed push is not handed out again while the claim lasts; a device
// a sender is busy with is left out; finishing a push (sent or retried)
// ends its claim; a released one is handed out again at once.
func testPushClaims(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	until := t0.Add(time.Minute)
	for _, j := range []store.PushJob{
		job("phone", "a", 3, "one", 1, t0),
		job("phone", "b", 3, "two", 2, t0.Add(time.Millisecond)),
		job("tablet", "a", 3, "three", 3, t0.Add(2*time.Millisecond)),
		job("watch", "a", 3, "later", 4, t0.Add(time.Hour)),
	} {
		if err := s.EnqueuePush(bg, j, t0); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(time.Second)
	got := claim(t, s, now, until, "tablet")
	if b := bodies(got); !slices.Equal(b, []string{"phone:one", "phone:two"}) {
		t.Fatalf("claimed %v, want phone's two pushes in due order, not the busy tablet's or the one not due", b)
	}
	for _, j := range got {
		if j.Claim != until.UnixMilli() {
			t.Fatalf("claim %d, want %d", j.Claim, until.UnixMilli())
		}
	}
	if again := claim(t, s, now, until); len(again) != 1 || again[0].DeviceID != "tablet" {
		t.Fatalf("second claim %v, want the tablet's alone: phone's are claimed", bodies(again))
	}
	if n := len(claim(t, s, now, until)); n != 0 {
		t.Fatalf("a third claim got %d pushes", n)
	}
	// DuePushes still lists them: it reads, it does not claim.
	if n := len(due(t, s, now)); n != 3 {
		t.Fatalf("due %d, want 3", n)
	}
	if err := s.DonePush(bg, got[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.RetryPush(bg, got[1], now, "503"); err != nil {
		t.Fatal(err)
	}
	retried := claim(t, s, now, until)
	if b := bodies(retried); !slices.Equal(b, []string{"phone:two"}) || retried[0].Attempts != 1 {
		t.Fatalf("after a send and a retry, claimed %v (%+v), want the retried push, unclaimed by its retry", b, retried)
	}
	if err := s.ReleasePush(bg, retried[0]); err != nil {
		t.Fatal(err)
	}
	if b := bodies(claim(t, s, now, until)); !slices.Equal(b, []string{"phone:two"}) {
		t.Fatalf("after a release, claimed %v", b)
	}
}

// A sender that died mid-send leaves its claim: the push is handed out
// again once the claim has ended (at least once), and the dead sender's
// late release cannot end the new sender's claim.
func testPushClaimExpires(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	if err := s.EnqueuePush(bg, job("phone", "a", 3, "one", 1, t0), t0); err != nil {
		t.Fatal(err)
	}
	first := claim(t, s, t0, t0.Add(time.Minute))
	if len(first) != 1 {
		t.Fatalf("claimed %d", len(first))
	}
	if n := len(claim(t, s, t0.Add(59*time.Second), t0.Add(2*time.Minute))); n != 0 {
		t.Fatalf("claimed %d before the claim ended", n)
	}
	second := claim(t, s, t0.Add(time.Minute), t0.Add(2*time.Minute))
	if len(second) != 1 || second[0].Claim == first[0].Claim {
		t.Fatalf("after the claim ended, claimed %+v", second)
	}
	if err := s.ReleasePush(bg, first[0]); err != nil {
		t.Fatal(err)
	}
	if n := len(claim(t, s, t0.Add(time.Minute), t0.Add(2*time.Minute))); n != 0 {
		t.Fatalf("the first sender's late release ended the second's claim: claimed %d", n)
	}
	if err := s.DonePush(bg, second[0]); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PendingPushes(bg); n != 0 {
		t.Fatalf("%d pushes left", n)
	}
}

// News merged into a push being sent waits for that send (one device
// gets its pushes in order), then goes out: the send's finish, which
// cannot remove the newer version, lets the claim go.
func testPushClaimNews(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	until := t0.Add(time.Minute)
	if err := s.EnqueuePush(bg, job("phone", "a", 3, "old", 1, t0), t0); err != nil {
		t.Fatal(err)
	}
	sending := claim(t, s, t0, until)
	if err := s.EnqueuePush(bg, job("phone", "a", 3, "new", 2, t0), t0); err != nil {
		t.Fatal(err)
	}
	if n := len(claim(t, s, t0, until)); n != 0 {
		t.Fatalf("the newer version was handed out during the send: %d", n)
	}
	if err := s.DonePush(bg, sending[0]); err != nil {
		t.Fatal(err)
	}
	if b := bodies(claim(t, s, t0, until)); !slices.Equal(b, []string{"phone:new"}) {
		t.Fatalf("after the old version's send, claimed %v, want the new one", b)
	}
}

// Senders claiming at once each get their own pushes: every push is
// handed out exactly once.
func testPushClaimsConcurrent(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	const n = 60
	for i := range n {
		if err := s.EnqueuePush(bg, job(fmt.Sprintf("dev%02d", i), "a", 3, fmt.Sprint(i), int64(i), t0), t0); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				js, err := s.ClaimPushes(bg, t0, t0.Add(time.Minute), 3, 7, nil)
				if err != nil {
					errs <- err
					return
				}
				if len(js) == 0 {
					return
				}
				mu.Lock()
				for _, j := range js {
					seen[j.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("%d pushes handed out, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("push %d handed out %d times", id, c)
		}
	}
}
