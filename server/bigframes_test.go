package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// bigAgent answers "N" with a reply of N MiB, in one piece (each update
// carries the whole text so far: fewer pieces, fewer megabytes to check).
type bigAgent struct{}

func (bigAgent) Name() string { return "big" }

func (bigAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	n, _ := strconv.Atoi(strings.TrimSpace(t.Input))
	emit(agent.Event{Kind: agent.Text, Text: strings.Repeat("b", n<<20)})
	return ctx.Err()
}

func withBigAgent(c *server.AppConfig) { c.Agent = bigAgent{} }

// A reply larger than a connection's whole queue budget (8 MiB) reaches
// every device, and a later sync replays it: the budget bounds the
// backlog, not the size of one frame. (The devices here read raw bytes:
// the schema is checked elsewhere, on frames of sane sizes.)
func TestReplyLargerThanTheQueueBudget(t *testing.T) {
	g := testgw.Start(t, withBigAgent)
	lean := func(id string) *raw {
		r := dialRaw(t, g)
		r.ws.SetReadLimit(32 << 20)
		r.writeJSON(helloFrame(testgw.Token, id))
		return r
	}
	// read reads raw frames up to one that contains every marker.
	read := func(r *raw, markers ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			_, data, err := r.ws.Read(ctx)
			if err != nil {
				return nil, fmt.Errorf("waiting for %v: %w", markers, err)
			}
			all := true
			for _, m := range markers {
				all = all && bytes.Contains(data, []byte(m))
			}
			if all {
				return data, nil
			}
		}
	}
	until := func(r *raw, markers ...string) []byte {
		t.Helper()
		data, err := read(r, markers...)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	a, b := lean("phone"), lean("tablet")
	ack := until(a, `"type":"hello.ack"`)
	var w struct {
		Payload struct {
			SyncCursor int64 `json:"sync_cursor"`
		} `json:"payload"`
	}
	json.Unmarshal(ack, &w)
	until(b, `"type":"hello.ack"`)
	b.writeJSON(map[string]any{"v": 1, "id": 5, "type": "message.send", "chat_id": "default", "payload": map[string]any{"text": "9"}})
	// Both read at once: a device that does not read for long is closed
	// as too slow, however large its frames.
	errs := make(chan error, 2)
	for _, d := range []*raw{a, b} {
		go func() {
			stop, err := read(d, `"type":"message.stop"`)
			if err == nil && bytes.Count(stop, []byte("b")) < 9<<20 {
				err = fmt.Errorf("message.stop carries %d bytes of the reply, want %d", bytes.Count(stop, []byte("b")), 9<<20)
			}
			if err == nil {
				_, err = read(d, `"type":"agent.idle"`)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []*raw{a, b} {
		d.writeJSON(map[string]any{"v": 1, "id": 6, "type": "ping", "payload": map[string]any{}})
		until(d, `"type":"pong"`) // still connected
	}
	c := lean("laptop")
	until(c, `"type":"hello.ack"`)
	c.writeJSON(map[string]any{"v": 1, "id": 7, "type": "sync", "payload": map[string]any{"cursor": w.Payload.SyncCursor}})
	until(c, `"type":"message.stop"`, `"cursor":`)
	until(c, `"type":"sync.done"`)
}

// A history page of long messages is bounded by bytes as well as by count:
// it holds the newest messages within gateway.MaxHistoryBytes (at least
// one), says has_more, and paging on from its oldest message reaches
// every message once.
func TestHistoryPageBoundedByBytes(t *testing.T) {
	g := testgw.Start(t, withBigAgent)
	a := g.Dial(t, "phone")
	for range 3 {
		send(t, a, def, "2")
		a.Expect("agent.idle", nil)
	}
	var seen []histMsg
	before := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("history never ends")
		}
		p := map[string]any{"limit": 50}
		if before != "" {
			p["before_message_id"] = before
		}
		h, err := history(t, a, def, p)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, m := range h.Messages {
			size += len(m.Text)
		}
		if len(h.Messages) > 1 && size > gateway.MaxHistoryBytes {
			t.Fatalf("a page of %d messages holds %d bytes of text", len(h.Messages), size)
		}
		seen = append(h.Messages, seen...)
		if !h.HasMore {
			break
		}
		before = h.OldestMessageID
	}
	if len(seen) != 6 {
		t.Fatalf("paged through %d messages, want 6", len(seen))
	}
	for i, m := range seen {
		if want := map[bool]string{true: "user", false: "assistant"}[i%2 == 0]; m.Role != want {
			t.Fatalf("message %d is %s, want %s: the pages skipped or repeated one", i, m.Role, want)
		}
	}
	a.MustDo("ping", client.Lane{}, nil)
}

// The directory is one frame (hello.ack, channel.list), not paged: its
// icons together are bounded, and a device connecting to a directory full
// of icons gets it.
func TestDirectoryIconsBounded(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	raw := make([]byte, gateway.MaxIconBytes)
	rand.Read(raw)
	copy(raw, "\x89PNG\r\n\x1a\n")
	icon := base64.StdEncoding.EncodeToString(raw)
	set, refused := 0, 0
	want := gateway.MaxDirectoryIcons / len(icon)
	for i := range want + 2 {
		c := createChannel(t, a, "icons "+strconv.Itoa(i), "")
		_, err := a.Do("channel.icon", client.Lane{ChatID: c.ChatID}, map[string]any{"icon": icon})
		if err != nil {
			wantCode(t, err, "media_too_large")
			refused++
			continue
		}
		set++
	}
	if set != want || refused != 2 {
		t.Fatalf("%d icons set, %d refused; want %d set", set, refused, want)
	}
	b := g.Dial(t, "tablet")
	if n := len(b.HelloAck().Channels); n != want+3 {
		t.Fatalf("hello.ack lists %d channels", n)
	}
	if n := len(channels(t, b)); n != want+3 {
		t.Fatalf("channel.list lists %d channels", n)
	}
}
