package push

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/fakentfy"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/postgres"
)

func openPG(t *testing.T) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), pgtest.DB(t), postgres.WithLog(testLog(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Issue 18: three replicas' pushers work one queue on PostgreSQL at once,
// each with its own pool, as three gateways do: every push reaches ntfy
// exactly once.
func TestReplicasSendEachPushOnce(t *testing.T) {
	nt := fakentfy.New(t)
	url := pgtest.DB(t)
	bg := context.Background()
	const devices = 40
	var pushers []*Pusher
	for i := range 3 {
		st, err := postgres.Open(bg, url, postgres.WithLog(testLog(t)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if i == 0 {
			for d := range devices {
				st.SeeDevice(bg, deviceWithTopic(d))
			}
		}
		pushers = append(pushers, New(st, testLog(t), Config{Backends: []Backend{&Ntfy{Server: nt.URL}}, Content: ContentFull, Concurrency: 4}))
	}
	// Queued through all three, as each replica's turns would.
	for d := range devices {
		pushers[d%3].Enqueue(bg, fmt.Sprintf("dev%02d", d), Note{Kind: KindMessage, Body: fmt.Sprint("news ", d), Cursor: int64(d + 1), Collapse: "default"})
	}
	// Rounds of all three at once, as their Run loops go round every
	// second: a pusher whose claim found the due rows locked by another's
	// claim (SKIP LOCKED) ends its round, and takes them up at the next.
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var got []fakentfy.Message
	seen := map[string]int{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < devices && time.Now().Before(deadline) {
		var wg sync.WaitGroup
		for _, p := range pushers {
			wg.Add(1)
			go func() { defer wg.Done(); p.SendDue(ctx) }()
		}
		wg.Wait()
		got = nt.Messages()
		clear(seen)
		for _, m := range got {
			seen[m.Topic]++
		}
	}
	if len(seen) != devices {
		t.Fatalf("%d devices got a push, want %d (%d publishes)", len(seen), devices, len(got))
	}
	for topic, n := range seen {
		if n != 1 {
			t.Fatalf("%s got %d pushes, want 1", topic, n)
		}
	}
	var claimed float64
	for _, p := range pushers {
		claimed += counterValue(t, p.claimed)
	}
	if claimed != devices {
		t.Fatalf("claimed %v in all, want %d: a push was handed out twice", claimed, devices)
	}
}

// A replica that dies mid-send leaves its push claimed: another sends it
// once the claim ends (at least once), not before.
func TestClaimOfADeadReplicaExpires(t *testing.T) {
	nt := fakentfy.New(t)
	st := openPG(t)
	bg := context.Background()
	st.SeeDevice(bg, deviceWithTopic(1))
	now := time.Unix(1_900_000_000, 0)
	clock := func() time.Time { return now }
	alive := New(st, testLog(t), Config{Backends: []Backend{&Ntfy{Server: nt.URL}}, Content: ContentFull, Now: clock, ClaimFor: time.Minute})
	alive.Enqueue(bg, "dev01", Note{Kind: KindMessage, Body: "news", Cursor: 1, Collapse: "default"})
	// The dead replica claimed it and never answered.
	if js, err := st.ClaimPushes(bg, now, now.Add(time.Minute), 10, 10, nil); err != nil || len(js) != 1 {
		t.Fatalf("the dead replica's claim: %v, %v", js, err)
	}
	alive.SendDue(bg)
	if got := nt.Messages(); len(got) != 0 {
		t.Fatalf("sent during another replica's claim: %+v", got)
	}
	now = now.Add(time.Minute)
	alive.SendDue(bg)
	if got := nt.Messages(); len(got) != 1 || got[0].Body != "news" {
		t.Fatalf("after the claim ended: %+v", got)
	}
	if n, _ := st.PendingPushes(bg); n != 0 {
		t.Fatalf("%d pushes still queued", n)
	}
}

func deviceWithTopic(d int) store.Device {
	return store.Device{ID: fmt.Sprintf("dev%02d", d), NtfyTopic: fmt.Sprintf("topic-%02d", d)}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
