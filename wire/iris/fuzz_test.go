package iris

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/internal/irisschema"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/store"
)

// The fuzz tests' seed corpora are in testdata/fuzz/<FuzzName>/: valid
// frames of every request type, null fields, huge numbers, wrong types,
// deep nesting, invalid UTF-8 and broken JSON.

var (
	fuzzSchemaOnce sync.Once
	fuzzSchema     *irisschema.Validator
	fuzzSchemaErr  error
)

func schemaFor(tb testing.TB) *irisschema.Validator {
	tb.Helper()
	fuzzSchemaOnce.Do(func() {
		fuzzSchema, fuzzSchemaErr = irisschema.Own()
	})
	if fuzzSchemaErr != nil {
		tb.Fatalf("loading the Iris schema: %v", fuzzSchemaErr)
	}
	return fuzzSchema
}

// errFrame is an error frame as sent.
type errFrame struct {
	ID      int64 `json:"id"`
	Type    string
	Payload struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"payload"`
}

func parseFrame(tb testing.TB, data []byte) errFrame {
	tb.Helper()
	var f errFrame
	if err := json.Unmarshal(data, &f); err != nil {
		tb.Fatalf("the gateway sent a frame that is not JSON: %v: %q", err, data)
	}
	return f
}

// envelopeFieldsDecode reports whether the input's envelope members all
// have the types the decoder reads them into (v number, type/chat_id/
// thread_id strings), so that json.Unmarshal of the envelope succeeds.
func envelopeFieldsDecode(data []byte) bool {
	var env struct {
		V        *int    `json:"v"`
		Type     string  `json:"type"`
		ChatID   *string `json:"chat_id"`
		ThreadID *string `json:"thread_id"`
	}
	return json.Unmarshal(data, &env) == nil
}

// version is the input's "v" as written, "" when it has none.
func version(data []byte) string {
	var v struct {
		V *json.Number `json:"v"`
	}
	if json.Unmarshal(data, &v) != nil || v.V == nil {
		return ""
	}
	return v.V.String()
}

// FuzzDecode fuzzes the frame decoder and the payload decoding of every
// request shape. Invariants: no panic; an input that is not JSON is
// refused; a refusal is an unsupported error whose frame validates against
// the schema and carries the input's id when it has a readable one; an
// accepted frame has a type and is recognised by Is.
func FuzzDecode(f *testing.F) {
	v := schemaFor(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		env, id, err := decode(data)
		if err != nil {
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != core.CodeUnsupported {
				t.Fatalf("decode(%q) = %v, want an unsupported error", data, err)
			}
			checkErrorFrame(t, v, errorFrame(id, ce), data, "decode")
			return
		}
		if !json.Valid(data) {
			t.Fatalf("decode accepted invalid JSON %q", data)
		}
		if env.Type == "" {
			t.Fatalf("decode accepted a frame without a type: %q", data)
		}
		if v := version(data); v != "" && v != strconv.Itoa(Version) {
			t.Fatalf("decode accepted version %s: %q", v, data)
		}
		if rid, ok := irisschema.ReadableID(data); ok && rid != id {
			t.Fatalf("decode read id %d from %q, want %d", id, data, rid)
		}
		if !Is(data) {
			t.Fatalf("decode accepted %q but Is says it is not an Iris frame", data)
		}
		for _, mk := range irisv1.AppToServer {
			p := mk()
			if err := payload(env, p); err != nil {
				var ce *core.Error
				if !errors.As(err, &ce) || ce.Code != core.CodeUnsupported {
					t.Fatalf("payload(%T) of %q = %v, want an unsupported error", p, data, err)
				}
				checkErrorFrame(t, v, errorFrame(id, ce), data, fmt.Sprintf("payload %T", p))
			}
		}
	})
}

// checkErrorFrame checks an error frame answering input: valid per the
// schema, code unsupported, and the input's id when it has a readable one
// and the envelope itself decodes.
func checkErrorFrame(t *testing.T, v *irisschema.Validator, frame, input []byte, what string) {
	t.Helper()
	if err := v.Server(frame); err != nil {
		t.Fatalf("%s: error frame for %q breaks the schema: %v", what, input, err)
	}
	ef := parseFrame(t, frame)
	if ef.Type != "error" || ef.Payload.Code != string(core.CodeUnsupported) {
		t.Fatalf("%s: answer to malformed %q is %s, want error{code:unsupported}", what, input, frame)
	}
	if rid, ok := irisschema.ReadableID(input); ok && envelopeFieldsDecode(input) && ef.ID != rid {
		t.Fatalf("%s: error for %q carries id %d, want the request's id %d: %s", what, input, ef.ID, rid, frame)
	}
}

// dispatchGW is a real gateway (SQLite store in a temporary directory,
// hub, committer, echo agent) for FuzzDispatch. Sessions are opened on it
// as the server does, with a hello frame.
type dispatchGW struct {
	st   *store.Store
	gw   *gateway.Gateway
	auth *gateway.Auth
	stop context.CancelFunc
	wg   sync.WaitGroup
	uses int
}

const fuzzToken = "fuzz-token"

func newDispatchGW(tb testing.TB, dir string) *dispatchGW {
	tb.Helper()
	st, err := store.Open(filepath.Join(dir, "irisgate.db"))
	if err != nil {
		tb.Fatalf("store: %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := hub.New(st, log, hub.DefaultLimits)
	g := &dispatchGW{st: st, auth: gateway.NewAuth(st, fuzzToken)}
	g.gw = gateway.New(st, h, log, gateway.Config{Agent: &agent.Echo{}})
	ctx, stop := context.WithCancel(context.Background())
	g.stop = stop
	g.wg.Add(2)
	go func() { defer g.wg.Done(); g.gw.Run(ctx) }()
	go func() { defer g.wg.Done(); h.Run(ctx, time.Second) }()
	return g
}

func (g *dispatchGW) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.gw.Shutdown(ctx)
	g.stop()
	g.wg.Wait()
	g.st.Close()
}

// replies maps request types to the frame types that answer them
// (besides an error), per DECISIONS.md "Replies to requests".
var replies = map[string][]string{
	"ping": {"pong"}, "message.send": {"message"}, "history": {"history"}, "sync": {"sync.done"},
	"message.delete": {"message.deleted"}, "agent.stop": {"agent.idle"}, "agent.steer": {"message"},
	"channel.list": {"channel.list"}, "channel.create": {"channel.created"},
	"channel.rename": {"channel.renamed"}, "channel.set_default": {"channel.renamed"},
	"channel.favorite": {"channel.renamed"}, "channel.icon": {"channel.renamed"},
	"channel.set_automation": {"channel.renamed"}, "channel.delete": {"channel.deleted"},
	"search": {"search.results"}, "media.upload.start": {"pong"}, "media.upload.end": {"media.upload.ack"},
	"media.pull": {"media.pull", "media.pull.end"}, "commands.catalog": {"commands.catalog"},
	"commands.complete": {"commands.complete"}, "hello": {},
}

// payloadShape is the type each request's payload is decoded into; nil
// for those whose payload the session does not read.
func payloadShape(typ string) any {
	switch typ {
	case "hello", "channel.list", "commands.catalog":
		return nil
	}
	if mk := irisv1.AppToServer[typ]; mk != nil {
		return mk()
	}
	return nil
}

// FuzzDispatch drives Session.Handle against a real in-process gateway:
// each input is the one frame a freshly opened session receives after its
// hello. Invariants: no panic; every frame the session is sent validates
// against the schema and none is an internal error; a frame the decoder
// refuses gets error{code:unsupported} (with the input's id when it has a
// readable one; a bad version is fatal, with such a frame); a known
// request whose payload does not decode gets the same; a request with an
// id whose type has a reply gets exactly one, carrying that id, of the
// right type or an error; a type the gateway does not know is ignored.
func FuzzDispatch(f *testing.F) {
	v := schemaFor(f)
	base := f.TempDir()
	var env *dispatchGW
	f.Cleanup(func() {
		if env != nil {
			env.close()
		}
	})
	hello := []byte(`{"v":1,"id":1,"type":"hello","payload":{"token":"` + fuzzToken + `","device_id":"fuzz-dev","device_name":"fuzz"}}`)

	f.Fuzz(func(t *testing.T, data []byte) {
		// A fresh gateway now and then bounds the outbox and directory the
		// inputs grow (sync replays the whole unproven outbox).
		if env == nil || env.uses >= 300 {
			if env != nil {
				env.close()
			}
			dir, err := os.MkdirTemp(base, "gw-")
			if err != nil {
				t.Fatal(err)
			}
			env = newDispatchGW(t, dir)
		}
		env.uses++
		ctx := context.Background()
		sess, err := Open(ctx, Config{GW: env.gw, Auth: env.auth, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, "fuzz", hello)
		if err != nil {
			t.Fatalf("opening a session: %v", err)
		}
		conn := sess.Conn()
		var got [][]byte
		take := func(wait time.Duration) {
			tctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			outs, _ := conn.Take(tctx, nil)
			for _, o := range outs {
				if o.Binary {
					continue
				}
				if err := v.Server(o.Data); err != nil {
					t.Fatalf("answer to %q breaks the schema: %v", data, err)
				}
				if ef := parseFrame(t, o.Data); ef.Type == "error" && ef.Payload.Code == string(core.CodeInternal) {
					t.Fatalf("internal error answering %q: %s", data, o.Data)
				}
				got = append(got, o.Data)
			}
		}
		take(0) // hello.ack and whatever the gateway greets with
		got = got[:0]
		defer func() {
			sess.Close()
			env.gw.Disconnect(conn)
			conn.Close(errors.New("fuzz input done"))
			take(0) // what is still queued is checked too
		}()

		typ, herr := sess.Handle(ctx, data)
		take(0)

		env0, id, derr := decode(data)
		if derr != nil {
			if derr == errBadVersion {
				var fe *Fatal
				if !errors.As(herr, &fe) {
					t.Fatalf("a frame of another version %q was not fatal: %v", data, herr)
				}
				checkErrorFrame(t, v, fe.Frame, data, "fatal")
				return
			}
			if herr != nil || typ != "other" {
				t.Fatalf("Handle(%q) = %q, %v; want other, nil", data, typ, herr)
			}
			// Broadcasts of a turn an earlier input started may come too;
			// the answer to this input is one error.
			var errs [][]byte
			for _, g := range got {
				if parseFrame(t, g).Type == "error" {
					errs = append(errs, g)
				}
			}
			if len(errs) != 1 {
				t.Fatalf("malformed %q got %d frames, want one error: %q", data, len(got), got)
			}
			checkErrorFrame(t, v, errs[0], data, "Handle")
			return
		}
		if herr != nil {
			t.Fatalf("Handle(%q) returned %v", data, herr)
		}
		if _, known := handlers[env0.Type]; !known {
			if typ != "other" {
				t.Fatalf("Handle(%q) names unknown type %q", data, typ)
			}
			// Ignored without an id; with one, answered unsupported.
			var answers [][]byte
			for _, g := range got {
				if ef := parseFrame(t, g); ef.Type == "error" || (id != 0 && ef.ID == id) {
					if id == 0 {
						t.Fatalf("unknown type %q without an id was answered: %s", env0.Type, g)
					}
					answers = append(answers, g)
				}
			}
			if id != 0 {
				if len(answers) != 1 {
					t.Fatalf("unknown type %q with id %d got %d answers, want one error: %q", env0.Type, id, len(answers), answers)
				}
				checkErrorFrame(t, v, answers[0], data, "Handle")
			}
			return
		}
		if typ != env0.Type {
			t.Fatalf("Handle(%q) = %q, want %q", data, typ, env0.Type)
		}
		want, needsReply := replies[env0.Type]
		if id == 0 || !needsReply {
			return
		}
		// Wait for the answer carrying the id (some come from other
		// goroutines: a sync's replay, a stopped turn's agent.idle).
		deadline := time.Now().Add(10 * time.Second)
		answer := func() []byte {
			for _, g := range got {
				if parseFrame(t, g).ID == id {
					return g
				}
			}
			return nil
		}
		for answer() == nil && time.Now().Before(deadline) {
			take(time.Until(deadline))
		}
		a := answer()
		if a == nil {
			t.Fatalf("%s request %q (id %d) got no answer within 10s; got %q", env0.Type, data, id, got)
		}
		take(0)
		n := 0
		for _, g := range got {
			if ef := parseFrame(t, g); ef.ID == id && ef.Type != "media.pull" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s request %q (id %d) got %d answers: %q", env0.Type, data, id, n, got)
		}
		ef := parseFrame(t, a)
		if shape := payloadShape(env0.Type); shape != nil && payload(env0, shape) != nil {
			checkErrorFrame(t, v, a, data, "malformed payload")
			return
		}
		if ef.Type == "error" {
			return
		}
		for _, w := range want {
			if ef.Type == w {
				return
			}
		}
		t.Fatalf("%s request %q answered with %s, want one of %v or an error", env0.Type, data, a, want)
	})
}

// TestMalformedEnvelopeKeepsID: a request whose envelope has a member of
// the wrong type (here "type": 5) but a readable integer id must be
// answered with error{code:unsupported} carrying that id (DECISIONS.md: "A
// malformed request gets unsupported with its id"), or the app waits for
// its answer forever.
func TestMalformedEnvelopeKeepsID(t *testing.T) {
	for _, in := range []string{
		`{"v":1,"id":7,"type":5,"payload":{}}`,
		`{"v":1,"id":7,"type":"ping","chat_id":5,"payload":{}}`,
		`{"v":"1","id":7,"type":"ping","payload":{}}`,
	} {
		_, id, err := decode([]byte(in))
		if err == nil {
			t.Fatalf("decode(%s) accepted it", in)
		}
		if id != 7 {
			t.Errorf("decode(%s) read id %d, want 7 (%v)", in, id, err)
		}
	}
}
