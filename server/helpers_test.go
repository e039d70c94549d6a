package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// TestMain fails the package when a test leaves goroutines behind: every
// gateway a test starts must be gone, with all its connections, when the
// tests end. It stops the PostgreSQL server the tests on it started
// (postgres_test.go) first.
func TestMain(m *testing.M) {
	pgtest.Main(m)
}

// with is a test's store option (on: testgw.OnPostgres, or none for
// SQLite) followed by the test's own edits of the configuration.
func with(on []func(*server.AppConfig), edit ...func(*server.AppConfig)) []func(*server.AppConfig) {
	return append(slices.Clone(on), edit...)
}

// slowEcho makes the gateway's echo agent pause between words, so a turn
// is still running when the test acts on it.
func slowEcho(d time.Duration) func(*server.AppConfig) {
	return func(c *server.AppConfig) { c.Agent = &agent.Echo{Delay: d} }
}

// words is a text of n distinct words.
func words(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("w%d", i+1)
	}
	return strings.Join(w, " ")
}

// wantCode asserts that err is an error frame with the given code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var se *client.ServerError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want an error frame with code %s", err, code)
	}
	if se.Code != code {
		t.Fatalf("error code = %s (%s), want %s", se.Code, se.Message, code)
	}
}

// until reads d's frames until stop holds for one, and returns them all,
// that one last.
func until(t *testing.T, d *testgw.Device, stop func(client.Frame) bool) []client.Frame {
	t.Helper()
	deadline := time.Now().Add(testgw.Wait)
	var got []client.Frame
	for {
		f, ok := d.NextWithin(max(time.Until(deadline), 0))
		if !ok {
			t.Fatalf("device %s: the awaited frame did not come within %v (got: %s)", d.ID, testgw.Wait, typesOf(got))
		}
		got = append(got, f)
		if stop(f) {
			return got
		}
	}
}

// is matches frames of one type for which every field given holds
// (payload fields, string-compared).
func is(t *testing.T, typ string, fields ...string) func(client.Frame) bool {
	return func(f client.Frame) bool {
		if f.Type != typ {
			return false
		}
		p := testgw.P(t, f)
		for i := 0; i+1 < len(fields); i += 2 {
			if fmt.Sprint(p[fields[i]]) != fields[i+1] {
				return false
			}
		}
		return true
	}
}

// reply matches the frame answering request id.
func reply(id int64) func(client.Frame) bool {
	return func(f client.Frame) bool { return f.ID == id }
}

// barrier round-trips a ping and returns the frames d got before the
// pong. Frames are ordered per connection and every request is handled
// in turn, so whatever an earlier request caused for d is among them.
func barrier(t *testing.T, d *testgw.Device) []client.Frame {
	t.Helper()
	pong := d.MustDo("ping", client.Lane{}, map[string]any{"ts": 1})
	got := until(t, d, reply(pong.ID))
	return got[:len(got)-1]
}

// none fails when one of frames matches.
func none(t *testing.T, who string, frames []client.Frame, match func(client.Frame) bool) {
	t.Helper()
	for _, f := range frames {
		if match(f) {
			t.Fatalf("%s got an unexpected frame: %s", who, f.Raw)
		}
	}
}

func typesOf(fs []client.Frame) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.Type
	}
	return strings.Join(s, ",")
}

// closed waits for d's connection to end and returns its close status (-1
// when it ended without a close frame).
func closed(t *testing.T, d *testgw.Device) websocket.StatusCode {
	t.Helper()
	for {
		f, ok := d.NextWithin(testgw.Wait)
		if !ok {
			break
		}
		_ = f
	}
	select {
	case <-d.Done():
	case <-time.After(testgw.Wait):
		t.Fatalf("device %s: connection still open", d.ID)
	}
	return websocket.CloseStatus(d.Err())
}

// chanEntry is a channel directory entry as the wire carries it.
type chanEntry struct {
	ChatID       string  `json:"chat_id"`
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	ParentChatID *string `json:"parent_chat_id"`
	IsDefault    bool    `json:"is_default"`
	Auto         bool    `json:"auto"`
	Favorite     bool    `json:"favorite"`
	Icon         *string `json:"icon"`
	Color        *string `json:"color"`
	Automation   bool    `json:"automation"`
}

func entry(t *testing.T, f client.Frame) chanEntry {
	t.Helper()
	var c chanEntry
	if err := f.Decode(&c); err != nil {
		t.Fatalf("%s payload: %v", f.Type, err)
	}
	return c
}

// channels lists the directory through a channel.list request.
func channels(t *testing.T, d *testgw.Device) []chanEntry {
	t.Helper()
	f := d.MustDo("channel.list", client.Lane{}, nil)
	if f.Type != "channel.list" {
		t.Fatalf("channel.list answered with %s", f.Raw)
	}
	var p struct {
		Channels []chanEntry `json:"channels"`
	}
	if err := f.Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p.Channels
}

func findChan(cs []chanEntry, chatID string) (chanEntry, bool) {
	for _, c := range cs {
		if c.ChatID == chatID {
			return c, true
		}
	}
	return chanEntry{}, false
}

// createChannel makes a channel (or, with a parent, a thread) and returns
// its entry.
func createChannel(t *testing.T, d *testgw.Device, name, parent string) chanEntry {
	t.Helper()
	p := map[string]any{"name": name, "kind": "channel"}
	if parent != "" {
		p["kind"], p["parent_chat_id"] = "thread", parent
	}
	f := d.MustDo("channel.create", client.Lane{}, p)
	if f.Type != "channel.created" {
		t.Fatalf("channel.create answered with %s", f.Raw)
	}
	return entry(t, f)
}

// histMsg is one message of a history page.
type histMsg struct {
	MessageID string `json:"message_id"`
	Role      string `json:"role"`
	Text      string `json:"text"`
	Model     string `json:"model"`
	TS        int64  `json:"ts"`
}

type histPage struct {
	Messages        []histMsg `json:"messages"`
	HasMore         bool      `json:"has_more"`
	OldestMessageID string    `json:"oldest_message_id"`
}

func history(t *testing.T, d *testgw.Device, lane client.Lane, p map[string]any) (histPage, error) {
	t.Helper()
	f, err := d.Do("history", lane, p)
	if err != nil {
		return histPage{}, err
	}
	if f.Type != "history" {
		t.Fatalf("history answered with %s", f.Raw)
	}
	var h histPage
	if err := f.Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h, nil
}

// send sends a message and returns the echo's message_id.
func send(t *testing.T, d *testgw.Device, lane client.Lane, text string) string {
	t.Helper()
	echo := d.MustDo("message.send", lane, map[string]any{"text": text})
	if echo.Type != "message" {
		t.Fatalf("message.send answered with %s", echo.Raw)
	}
	return testgw.Str(t, echo, "message_id")
}

// raw is a WebSocket without the client package, for what happens before
// and around hello.
type raw struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialRaw(t *testing.T, g *testgw.GW) *raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, g.URL, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return &raw{t: t, ws: ws}
}

func (r *raw) write(typ websocket.MessageType, data []byte) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	if err := r.ws.Write(ctx, typ, data); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *raw) writeJSON(v any) {
	r.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(websocket.MessageText, b)
}

func helloFrame(token, deviceID string) map[string]any {
	return map[string]any{"v": 1, "id": 1, "type": "hello", "payload": map[string]any{
		"token": token, "device_id": deviceID, "device_name": deviceID, "caps": map[string]any{"min_protocol": 1},
	}}
}

// read returns the next frame, validated against the schema.
func (r *raw) read() (client.Frame, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	typ, data, err := r.ws.Read(ctx)
	if err != nil {
		return client.Frame{}, err
	}
	if typ != websocket.MessageText {
		r.t.Fatalf("unexpected binary frame")
	}
	if err := testgw.Schema(r.t).Server(data); err != nil {
		r.t.Errorf("frame breaks the schema: %v", err)
	}
	var f client.Frame
	if err := json.Unmarshal(data, &f); err != nil {
		r.t.Fatalf("frame %s: %v", data, err)
	}
	f.Raw = data
	return f, nil
}

// untilClose reads until the gateway closes the connection and returns
// the frames it sent and the close status.
func (r *raw) untilClose() ([]client.Frame, websocket.StatusCode) {
	r.t.Helper()
	var got []client.Frame
	for {
		f, err := r.read()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				r.t.Fatalf("connection still open after %v (got: %s)", testgw.Wait, typesOf(got))
			}
			return got, websocket.CloseStatus(err)
		}
		got = append(got, f)
	}
}

// refused asserts that the gateway answered with exactly one error frame
// of code and closed the connection with status.
func (r *raw) refused(code string, status websocket.StatusCode) {
	r.t.Helper()
	got, st := r.untilClose()
	if len(got) != 1 || got[0].Type != "error" {
		r.t.Fatalf("frames before the close: %s, want one error", typesOf(got))
	}
	if c := testgw.Str(r.t, got[0], "code"); c != code {
		r.t.Fatalf("error code = %s (%s), want %s", c, got[0].Raw, code)
	}
	if st != status {
		r.t.Fatalf("close status = %v, want %v", st, status)
	}
}

// runCronText adds a job posting text into the default channel every hour
// and makes it due now: the gateway posts it within moments.
func runCronText(t *testing.T, g *testgw.GW, name, text string) store.CronJob {
	t.Helper()
	ctx := context.Background()
	j, err := cron.Add(ctx, g.App.Store, store.CronJob{Name: name, Schedule: "every 1h", Text: text}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := cron.RunNow(ctx, g.App.Store, j.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	return j
}
