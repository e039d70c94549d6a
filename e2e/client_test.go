package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// clientCatchesUp checks that a client.Client that loses its connection
// gets, after reconnecting, a message another device sent while it was
// away (by its sync). With primed, the outbox has a frame before the client
// first connects.
func clientCatchesUp(t *testing.T, primed bool) {
	g := testgw.Start(t)
	other := g.Dial(t, "other")
	def := client.Lane{ChatID: "default"}
	if primed {
		other.MustDo("channel.create", client.Lane{}, map[string]any{"name": "primer"})
	}

	c := client.New(g.URL, client.Options{Token: testgw.Token, DeviceID: "roamer"}, 0)
	var (
		mu     sync.Mutex
		awayID string
	)
	drops := 0
	// Called on the client's goroutine before it waits to reconnect: the
	// message is committed while the client is certainly away.
	c.OnState = func(connected bool, err error) {
		if connected {
			return
		}
		drops++
		if drops == 1 {
			rctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
			defer cancel()
			f, err := other.Request(rctx, "message.send", def, map[string]any{"text": "sent while you were away"})
			if err != nil {
				t.Errorf("message.send while the client is away: %v", err)
				return
			}
			var p struct {
				ID string `json:"message_id"`
			}
			f.Decode(&p)
			mu.Lock()
			awayID = p.ID
			mu.Unlock()
		}
	}
	r := record(t, "roamer", c.Events())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		r.waitClosed(5 * time.Second)
	}()

	conn, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn.CloseNow()
	r.waitFor(10*time.Second, "a sync.done and the message sent while the client was away", func(fs []client.Frame) bool {
		mu.Lock()
		id := awayID
		mu.Unlock()
		return id != "" && has(fs, func(f client.Frame) bool { return f.Type == "sync.done" }) &&
			has(fs, func(f client.Frame) bool { return f.Type == "message" && str(t, f, "message_id") == id })
	})
}

// TestClientCatchesUpAfterReconnect: a Client that first connected to a
// gateway with a non-empty outbox syncs after a drop.
func TestClientCatchesUpAfterReconnect(t *testing.T) { clientCatchesUp(t, true) }

// TestClientCatchesUpAfterReconnectFromEmptyOutbox: the same when the
// outbox was empty (head 0) at the client's first connection. (A
// regression test: the client took cursor 0 for "never connected" and
// skipped the sync after every reconnect.)
func TestClientCatchesUpAfterReconnectFromEmptyOutbox(t *testing.T) {
	clientCatchesUp(t, false)
}
