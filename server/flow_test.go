package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/internal/version"
	"github.com/irisgate/irisgate/server"
)

func TestPing(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	pong := a.MustDo("ping", client.Lane{}, map[string]any{"ts": 1724000000000})
	if pong.Type != "pong" || pong.ChatID != "" {
		t.Fatalf("ping answered with %s", pong.Raw)
	}
	if ts := testgw.P(t, pong)["ts"]; ts != float64(1724000000000) {
		t.Errorf("pong ts = %v, want the ping's", ts)
	}
	if pong = a.MustDo("ping", client.Lane{}, nil); pong.Type != "pong" {
		t.Fatalf("ping without ts answered with %s", pong.Raw)
	}
}

func TestBadFrames(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		frame string
		id    int64 // the error's id
	}{
		{"not JSON", `{"v":1,"id":5,"type":"ping"`, 0},
		{"not an object", `[1,2,3]`, 0},
		{"no type", `{"v":1,"id":6,"payload":{}}`, 6},
		{"id not an integer", `{"v":1,"id":"seven","type":"ping","payload":{}}`, 0},
		{"wrong payload field type", `{"v":1,"id":8,"type":"message.send","chat_id":"default","payload":{"text":42}}`, 8},
		{"payload not an object", `{"v":1,"id":9,"type":"history","chat_id":"default","payload":"all of it"}`, 9},
		{"limit not a number", `{"v":1,"id":10,"type":"history","chat_id":"default","payload":{"limit":"ten"}}`, 10},
		{"message_ids not a list", `{"v":1,"id":11,"type":"message.delete","chat_id":"default","payload":{"message_ids":"m_1"}}`, 11},
		{"cursor not a number", `{"v":1,"id":12,"type":"sync","payload":{"cursor":"latest"}}`, 12},
		{"second hello", `{"v":1,"id":13,"type":"hello","payload":{"token":"test-token"}}`, 13},
		{"bad search scope", `{"v":1,"id":14,"type":"search","payload":{"query":"x","scope":"everywhere"}}`, 14},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := a.In(t)
			if err := a.SendRaw(ctx, []byte(tc.frame), false); err != nil {
				t.Fatal(err)
			}
			f := a.Expect("error", nil)
			if testgw.Str(t, f, "code") != "unsupported" || f.ID != tc.id {
				t.Fatalf("got %s, want an unsupported error with id %d", f.Raw, tc.id)
			}
			if m := testgw.Str(t, f, "message"); m == "" {
				t.Errorf("error without a message")
			}
		})
	}
	// None of it cost the connection, or did anything.
	none(t, "phone", barrier(t, a), func(f client.Frame) bool { return f.Type != "status" })
}

func TestUnknownTypesIgnored(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	ctx := context.Background()
	for _, frame := range []string{
		`{"v":1,"id":40,"type":"future.thing","payload":{"x":1}}`,
		`{"v":1,"type":"another.one"}`,
		`{"type":"no.version","payload":null}`,
	} {
		if err := a.SendRaw(ctx, []byte(frame), false); err != nil {
			t.Fatal(err)
		}
	}
	// Unknown payload fields are ignored as well.
	pong := a.MustDo("ping", client.Lane{}, map[string]any{"ts": 3, "extra": "field"})
	if pong.Type != "pong" {
		t.Fatalf("ping answered with %s", pong.Raw)
	}
	got := until(t, a, reply(pong.ID))
	// The one with an id is answered (every request with an id is), the
	// others are not.
	var answered []client.Frame
	for _, f := range got[:len(got)-1] {
		if f.Type != "status" {
			answered = append(answered, f)
		}
	}
	if len(answered) != 1 || answered[0].ID != 40 || answered[0].Type != "error" || testgw.Str(t, answered[0], "code") != "unsupported" {
		t.Fatalf("answers to the unknown types: %s, want error{unsupported} with id 40 alone", typesOf(answered))
	}
}

func TestVersionMismatchAfterHello(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	if err := a.SendRaw(context.Background(), []byte(`{"v":2,"id":3,"type":"ping","payload":{}}`), false); err != nil {
		t.Fatal(err)
	}
	f := a.Expect("error", nil)
	if testgw.Str(t, f, "code") != "unsupported" || f.ID != 3 {
		t.Fatalf("got %s", f.Raw)
	}
	if st := closed(t, a); st != websocket.StatusPolicyViolation {
		t.Fatalf("close status %v, want 1008", st)
	}
}

func TestOversizedFrame(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.MaxFrame = 4096 })
	a := g.Dial(t, "phone")
	// Just under the limit is fine.
	pad := strings.Repeat("x", 4096-len(`{"v":1,"type":"x","payload":{"p":""}}`))
	if err := a.SendRaw(context.Background(), []byte(`{"v":1,"type":"x","payload":{"p":"`+pad+`"}}`), false); err != nil {
		t.Fatal(err)
	}
	a.MustDo("ping", client.Lane{}, nil)

	big, _ := json.Marshal(map[string]any{"v": 1, "id": 9, "type": "message.send", "chat_id": "default",
		"payload": map[string]any{"text": strings.Repeat("y", 8192)}})
	if err := a.SendRaw(context.Background(), big, false); err != nil {
		t.Fatal(err)
	}
	f := a.Expect("error", nil)
	if testgw.Str(t, f, "code") != "unsupported" || !strings.Contains(testgw.Str(t, f, "message"), "4096") {
		t.Errorf("got %s", f.Raw)
	}
	if st := closed(t, a); st != websocket.StatusMessageTooBig {
		t.Fatalf("close status %v, want 1009", st)
	}
	// The oversized message was not taken.
	b := g.Dial(t, "tablet")
	if h, err := history(t, b, def, nil); err != nil || len(h.Messages) != 0 {
		t.Errorf("history %+v, %v", h, err)
	}
}

func TestBinaryOutsideUpload(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	if err := a.SendRaw(context.Background(), []byte{0x89, 'P', 'N', 'G'}, true); err != nil {
		t.Fatal(err)
	}
	f := a.Expect("error", nil)
	if testgw.Str(t, f, "code") != "unsupported" {
		t.Fatalf("got %s", f.Raw)
	}
	a.MustDo("ping", client.Lane{}, nil)
}

func TestGracefulShutdown(t *testing.T) {
	g := testgw.Start(t, slowEcho(20*time.Millisecond))
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	text := words(500)
	send(t, a, def, text)
	a.Expect("message.update", nil)
	b.Expect("message.update", nil)

	g.Close()
	for _, d := range []*testgw.Device{a, b} {
		got := until(t, d, func(f client.Frame) bool { return f.Type == "status" })
		if st := testgw.P(t, got[len(got)-1])["state"]; st != "restarting" {
			t.Fatalf("%s: status %v, want restarting", d.ID, st)
		}
		// The running turn ended first, its text so far kept.
		var stop, idle bool
		for _, f := range got {
			switch f.Type {
			case "message.stop":
				p := testgw.Str(t, f, "final_text")
				stop = p != "" && strings.HasPrefix(text, p) && p != text
			case "agent.idle":
				idle = stop
			}
		}
		if !stop || !idle {
			t.Errorf("%s: before restarting: %s", d.ID, typesOf(got))
		}
		if st := closed(t, d); st != websocket.StatusGoingAway {
			t.Errorf("%s: close status %v, want 1001", d.ID, st)
		}
	}
	// New connections are refused.
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	if _, err := client.Dial(ctx, g.URL, client.Options{Token: testgw.Token, DeviceID: "late"}); err == nil {
		t.Fatal("dialled a closed gateway")
	}
}

func TestShutdownWithHalfOpenConnection(t *testing.T) {
	g := testgw.Start(t)
	r := dialRaw(t, g) // never says hello
	status := make(chan websocket.StatusCode, 1)
	go func() { // reads as an app does, answering the close
		_, _, err := r.ws.Read(context.Background())
		status <- websocket.CloseStatus(err)
	}()
	a := g.Dial(t, "phone")
	start := time.Now()
	g.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v waiting for a connection that never said hello", d)
	}
	if st := <-status; st != websocket.StatusGoingAway {
		t.Errorf("half-open connection closed with %v, want 1001", st)
	}
	if st := closed(t, a); st != websocket.StatusGoingAway {
		t.Errorf("close status %v, want 1001", st)
	}
}

// get fetches a URL without keeping the connection around.
func get(t *testing.T, url string) (int, string, []byte) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testgw.Wait}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

func TestHealthz(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	createChannel(t, a, "Reports", "")
	code, ctype, body := get(t, "http://"+g.Addr+"/healthz")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("healthz: %d %s %s", code, ctype, body)
	}
	var h struct {
		Status      string `json:"status"`
		Connections int    `json:"connections"`
		OutboxHead  int64  `json:"outbox_head"`
		Agent       string `json:"agent"`
		Version     string `json:"version"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || h.Connections != 1 || h.OutboxHead != 1 || !strings.Contains(h.Agent, "echo") || h.Version != version.String() || h.Version == "" {
		t.Errorf("healthz: %s", body)
	}
}

func TestMetrics(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	send(t, a, def, "count me")
	a.Expect("agent.idle", nil)
	code, _, body := get(t, "http://"+g.Addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{
		"irisgate_connections 1",
		`irisgate_frames_in_total{dialect="iris",type="hello"} 1`,
		`irisgate_frames_in_total{dialect="iris",type="message.send"} 1`,
		`irisgate_turns_total{outcome="ok"} 1`,
		"irisgate_outbox_head ",
		"irisgate_turn_seconds_count 1",
		"go_goroutines",
		fmt.Sprintf("irisgate_build_info{go=%q,version=%q} 1", version.Get().Go, version.String()),
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if code, _, _ := get(t, "http://"+g.Addr+"/nothing"); code != http.StatusNotFound {
		t.Errorf("unknown path: %d", code)
	}
}

func TestKeepalivePingsSpareLiveDevices(t *testing.T) {
	// The interval is also the time a pong has: short, but ample for a
	// device that reads.
	g := testgw.Start(t, slowEcho(20*time.Millisecond), func(c *server.AppConfig) { c.Server.PingInterval = 150 * time.Millisecond })
	a := g.Dial(t, "phone")
	// The turn lasts several ping intervals; a device that reads answers
	// every ping and stays.
	send(t, a, def, words(40))
	if stop := a.Expect("message.stop", nil); testgw.Str(t, stop, "final_text") != words(40) {
		t.Fatalf("turn %s", stop.Raw)
	}
	a.MustDo("ping", client.Lane{}, nil)
}

func TestRequestsWithoutReply(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	ctx := context.Background()
	for _, f := range []string{
		`{"v":1,"id":50,"type":"fcm.register","payload":{"fcm_token":"fcm-new","ntfy_topic":"topic-1"}}`,
		`{"v":1,"id":51,"type":"picker.select","payload":{"picker_id":"pc_stale","value":"high"}}`,
	} {
		if err := a.SendRaw(ctx, []byte(f), false); err != nil {
			t.Fatal(err)
		}
	}
	// fcm.register has a reply of its own (issue 12 item 7): exactly one
	// pong with its id. A stale picker.select has none.
	got := barrier(t, a)
	none(t, "phone", got, func(f client.Frame) bool { return f.Type != "status" && f.ID != 50 })
	replies := 0
	for _, f := range got {
		if f.ID == 50 && f.Type == "pong" {
			replies++
		}
	}
	if replies != 1 {
		t.Fatalf("fcm.register got %d pongs: %+v", replies, got)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(g.Dir, server.DBFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var fcm, topic string
	if err := db.QueryRow(`SELECT fcm_token, ntfy_topic FROM devices WHERE device_id = 'phone'`).Scan(&fcm, &topic); err != nil {
		t.Fatal(err)
	}
	if fcm != "fcm-new" || topic != "topic-1" {
		t.Errorf("push registration %q %q", fcm, topic)
	}
}
