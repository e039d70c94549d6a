package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// A device that drops and comes back gets what it missed, even on a
// gateway whose outbox was empty when it first connected.
func TestClientReconnectsAndSyncs(t *testing.T) {
	g := testgw.Start(t)
	p := g.NewProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	states := make(chan bool, 16)
	c := client.New(p.URL, client.Options{Token: testgw.Token, DeviceID: "roamer"}, 0)
	c.OnState = func(up bool, err error) { states <- up }
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitState(t, states, true)
	if _, err := c.Conn(ctx); err != nil {
		t.Fatal(err)
	}

	p.Pause()
	p.Cut()
	waitState(t, states, false)
	other := g.Dial(t, "other")
	echo := other.MustDo("message.send", client.Lane{ChatID: "default"}, map[string]any{"text": "while you were away"})
	id := testgw.Str(t, echo, "message_id")
	other.Expect("agent.idle", nil)
	p.Resume()

	schema := testgw.Schema(t)
	seen := false
	deadline := time.After(testgw.Wait)
	for !seen {
		select {
		case f := <-c.Events():
			if err := schema.Server(f.Raw); err != nil {
				t.Error(err)
			}
			if f.Type == "message" && f.Cursor > 0 && testgw.Str(t, f, "message_id") == id {
				seen = true
			}
		case <-deadline:
			t.Fatal("the message sent while the device was away was not replayed")
		}
	}
	if c.Cursor() == 0 {
		t.Fatal("cursor did not advance")
	}
	cancel()
	<-done
	for range c.Events() {
	}
}

func waitState(t *testing.T, states <-chan bool, want bool) {
	t.Helper()
	deadline := time.After(testgw.Wait)
	for {
		select {
		case up := <-states:
			if up == want {
				return
			}
		case <-deadline:
			t.Fatalf("no connection state %v", want)
		}
	}
}
