package server_test

import (
	"context"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// Every request with an id gets exactly one reply (DECISIONS.md): a
// media.upload.start that opens its upload is answered with a pong
// carrying its id, and a request of a type the gateway does not know with
// error{unsupported} carrying its id. (Before, both went unanswered.)
// Without an id, an unknown type is ignored, for forward compatibility.
func TestEveryRequestWithAnIDIsAnswered(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	f := a.MustDo("media.upload.start", client.Lane{}, map[string]any{"media_ref": "mu_1", "kind": "document", "mime": "text/plain", "size": 5, "filename": "a.txt"})
	if f.Type != "pong" {
		t.Fatalf("media.upload.start answered %s", f.Raw)
	}
	if err := a.SendRaw(context.Background(), []byte{'h', 'e', 'l', 'l', 'o'}, true); err != nil {
		t.Fatal(err)
	}
	if f := a.MustDo("media.upload.end", client.Lane{}, map[string]any{"media_ref": "mu_1", "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}); f.Type != "media.upload.ack" {
		t.Fatalf("media.upload.end answered %s", f.Raw)
	}
	_, err := a.Do("agent.dance", client.Lane{}, map[string]any{})
	wantCode(t, err, "unsupported")
	if err := a.SendRaw(context.Background(), []byte(`{"v":1,"type":"agent.dance","payload":{}}`), false); err != nil {
		t.Fatal(err)
	}
	none(t, "phone", barrier(t, a), func(f client.Frame) bool { return f.Type == "error" && f.ID == 0 })
}
