package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// Each lane's queue is bounded, and lanes are cheap: turns are bounded
// across lanes too, per token and in all, and only a few run at once.
// (Before, 2000 auto-thread sends held 1444 goroutines, 1424 channels and
// 1416 turn rows, all reloaded at the next start.)
func TestTurnsAreBoundedAcrossLanes(t *testing.T) {
	const perToken, inAll, running = 6, 9, 2
	g := testgw.Start(t, slowEcho(20*time.Millisecond), func(c *server.AppConfig) {
		c.Bounds = gateway.Bounds{PerToken: perToken, InAll: inAll, Running: running}
	})
	ctx := context.Background()
	other, _, err := gateway.CreateToken(ctx, g.App.Store, "other", "")
	if err != nil {
		t.Fatal(err)
	}
	a := g.Dial(t, "phone")
	b, err := g.DialErr(t, "tablet", other)
	if err != nil {
		t.Fatal(err)
	}
	var lanes []client.Lane
	for i := range perToken + inAll {
		lanes = append(lanes, client.Lane{ChatID: createChannel(t, a, fmt.Sprint("lane-", i), "").ChatID})
	}
	sendAll := func(d *testgw.Device, lanes []client.Lane) (ok int, refused []string) {
		for _, l := range lanes {
			if _, err := d.Do("message.send", l, map[string]any{"text": words(40)}); err != nil {
				wantCode(t, err, "rate_limited")
				refused = append(refused, err.Error())
				continue
			}
			ok++
		}
		return ok, refused
	}
	// One token: its bound.
	ok, refused := sendAll(a, lanes[:perToken+2])
	if ok != perToken || len(refused) != 2 || !strings.Contains(refused[0], "token") {
		t.Fatalf("one token: %d accepted, refused %q; want %d and 2", ok, refused, perToken)
	}
	// Another token: the bound in all.
	ok, refused = sendAll(b, lanes[perToken+2:perToken+2+inAll-perToken+1])
	if ok != inAll-perToken || len(refused) != 1 {
		t.Fatalf("another token: %d accepted, refused %q; want %d and 1", ok, refused, inAll-perToken)
	}
	owed, err := g.App.Store.Turns(ctx)
	if err != nil || len(owed) != inAll {
		t.Fatalf("%d turns owed in the store, want %d (%v)", len(owed), inAll, err)
	}
	if n := goroutinesIn("gateway/turn.(*Runner).runLane("); n > inAll {
		t.Fatalf("%d lanes' goroutines, want at most %d", n, inAll)
	}
	// At most two run at once, and all are answered.
	busy, most, idle := 0, 0, 0
	for idle < inAll {
		f := a.Next()
		switch f.Type {
		case "agent.busy":
			busy++
			most = max(most, busy)
		case "agent.idle":
			busy--
			idle++
		}
	}
	if most > running {
		t.Fatalf("%d turns ran at once, want at most %d", most, running)
	}
	// Answered, the slots are free again.
	if _, err := a.Do("message.send", lanes[0], map[string]any{"text": "again"}); err != nil {
		t.Fatalf("after the answers: %v", err)
	}
}

// Auto-threads one token opens are bounded a minute, and the channel
// directory in all: past either, a clear rate_limited, nothing stored.
func TestAutoThreadsAndTheDirectoryAreBounded(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Bounds = gateway.Bounds{AutoThreadsPerMinute: 3, Channels: 6}
	})
	a := g.Dial(t, "phone")
	for i := range 4 {
		_, err := a.Do("message.send", def, map[string]any{"text": fmt.Sprint("new topic ", i), "auto_thread": true})
		if i < 3 && err != nil {
			t.Fatalf("auto-thread %d: %v", i, err)
		}
		if i == 3 {
			wantCode(t, err, "rate_limited")
			if !strings.Contains(err.Error(), "threads a minute") {
				t.Fatalf("refused with %v", err)
			}
		}
	}
	if n := len(channels(t, a)); n != 4 {
		t.Fatalf("%d channels after the refusal, want default and 3 threads", n)
	}
	createChannel(t, a, "fifth", "")
	createChannel(t, a, "sixth", "")
	_, err := a.Do("channel.create", client.Lane{}, map[string]any{"name": "seventh", "kind": "channel"})
	wantCode(t, err, "rate_limited")
	if !strings.Contains(err.Error(), "directory is full") {
		t.Fatalf("refused with %v", err)
	}
	if n := len(channels(t, a)); n != 6 {
		t.Fatalf("%d channels, want the bound of 6", n)
	}
}
