package iris

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// TestHandlersCoverEveryRequest: the handler table and irisv1's list of
// app-to-server frame types name the same types, so a request added to the
// protocol without a handler (silently ignored, counted as "other") fails
// here, and so does a handler for a type the protocol does not have.
func TestHandlersCoverEveryRequest(t *testing.T) {
	var missing, extra []string
	for typ := range irisv1.AppToServer {
		if handlers[typ] == nil {
			missing = append(missing, typ)
		}
	}
	for typ := range handlers {
		if irisv1.AppToServer[typ] == nil {
			extra = append(extra, typ)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("request types without a handler: %v; handlers for types irisv1 does not list: %v", missing, extra)
	}
}

// TestRequestAnswers pins what the dialect itself answers, before and
// after the handler table replaced the dispatch switch: the metrics label
// Handle returns, and the frame answering the request (its type, and for
// an error its code and message, word for word). These are the dialect's
// own refusals (malformed payloads, missing members, in the order they
// are checked) and the requests whose payload is not read at all.
func TestRequestAnswers(t *testing.T) {
	env := newDispatchGW(t, t.TempDir())
	defer env.close()
	ctx := context.Background()
	hello := []byte(`{"v":1,"id":1,"type":"hello","payload":{"token":"` + fuzzToken + `","device_id":"answers","device_name":"answers"}}`)
	sess, err := Open(ctx, Config{GW: env.gw, Auth: env.auth, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, "test", hello)
	if err != nil {
		t.Fatalf("opening a session: %v", err)
	}
	conn := sess.Conn()
	defer func() {
		sess.Close()
		env.gw.Disconnect(conn)
		conn.Close(errors.New("test done"))
	}()
	taken, cancel := context.WithCancel(ctx)
	cancel() // Take then returns what is queued, without waiting
	conn.Take(taken, nil)

	for _, c := range []struct {
		frame, label string
		want         string // the answer's type, or "error code: message"; "" for none
	}{
		{`{"v":1,"id":9,"type":"hello","payload":5}`, "hello", "error unsupported: already said hello"},
		{`{"v":1,"id":9,"type":"channel.list","payload":[1]}`, "channel.list", "channel.list"},
		{`{"v":1,"id":9,"type":"commands.catalog","payload":"x"}`, "commands.catalog", "commands.catalog"},
		{`{"v":1,"id":9,"type":"ping","payload":{"ts":"soon"}}`, "ping", "error unsupported: malformed ping payload: ts must be int64"},
		{`{"v":1,"id":9,"type":"ping","payload":null}`, "ping", "pong"},
		{`{"v":1,"id":9,"type":"channel.rename","payload":{"name":"Kitchen"}}`, "channel.rename", "error unsupported: channel.rename needs a chat_id"},
		{`{"v":1,"id":9,"type":"channel.rename","chat_id":"default","payload":{}}`, "channel.rename", "error unsupported: channel.rename needs a name"},
		{`{"v":1,"id":9,"type":"channel.rename","payload":{"chat_id":"default"}}`, "channel.rename", "error unsupported: channel.rename needs a name"},
		{`{"v":1,"id":9,"type":"channel.rename","payload":{"name":7}}`, "channel.rename", "error unsupported: malformed channel.rename payload: name must be string"},
		{`{"v":1,"id":9,"type":"channel.favorite","chat_id":"default","payload":{}}`, "channel.favorite", "error unsupported: channel.favorite needs on"},
		{`{"v":1,"id":9,"type":"channel.set_automation","chat_id":"default","payload":{}}`, "channel.set_automation", "error unsupported: channel.set_automation needs on"},
		{`{"v":1,"id":9,"type":"channel.icon","payload":{"icon":5}}`, "channel.icon", "error unsupported: channel.icon needs a chat_id"},
		{`{"v":1,"id":9,"type":"channel.icon","chat_id":"default","payload":{"icon":5}}`, "channel.icon", "error unsupported: icon must be a string or null"},
		{`{"v":1,"id":9,"type":"channel.icon","chat_id":"default","payload":{"icon":null,"color":[]}}`, "channel.icon", "error unsupported: color must be a string or null"},
		{`{"v":1,"id":9,"type":"channel.delete","payload":{}}`, "channel.delete", "error unsupported: channel.delete needs a chat_id"},
		{`{"v":1,"id":9,"type":"channel.set_default","payload":{}}`, "channel.set_default", "error unsupported: channel.set_default needs a chat_id"},
		{`{"v":1,"id":9,"type":"channel.set_default","chat_id":"c_nope","payload":{}}`, "channel.set_default", `error not_found: unknown chat_id "c_nope"`},
		{`{"v":1,"id":9,"type":"commands.complete","payload":{"prefix":"/mod"}}`, "commands.complete", "commands.complete"},
		{`{"v":1,"id":9,"type":"search","payload":{"query":5}}`, "search", "error unsupported: malformed search payload: query must be string"},
		// An unknown type is ignored without an id, and answered with one:
		// every request with an id gets its one reply.
		{`{"v":1,"type":"future.thing","payload":{"a":1}}`, "other", ""},
		{`{"v":1,"id":9,"type":"future.thing","payload":{"a":1}}`, "other", `error unsupported: unknown request type "future.thing"`},
	} {
		label, herr := sess.Handle(ctx, []byte(c.frame))
		if herr != nil {
			t.Errorf("Handle(%s) = %v", c.frame, herr)
			continue
		}
		outs, _ := conn.Take(taken, nil)
		var got []string
		for _, o := range outs {
			var f struct {
				ID      int64
				Type    string
				Payload irisv1.Error
			}
			if err := json.Unmarshal(o.Data, &f); err != nil {
				t.Fatalf("answer to %s is not JSON: %q", c.frame, o.Data)
			}
			if f.ID != 9 {
				continue
			}
			a := f.Type
			if f.Type == irisv1.TypeError {
				a += " " + f.Payload.Code + ": " + f.Payload.Message
			}
			got = append(got, a)
		}
		want := []string{c.want}
		if c.want == "" {
			want = nil
		}
		if label != c.label || !slices.Equal(got, want) {
			t.Errorf("Handle(%s) = %q answered %q; want %q answered %q", c.frame, label, got, c.label, want)
		}
	}
}
