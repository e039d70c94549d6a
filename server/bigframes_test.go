package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// bigAgent answers "N" with a reply of N MiB, in 1 MiB chunks.
type bigAgent struct{}

func (bigAgent) Name() string { return "big" }

func (bigAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	n, _ := strconv.Atoi(strings.TrimSpace(t.Input))
	chunk := strings.Repeat("b", 1<<20-1) + " "
	for range n {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		emit(agent.Event{Kind: agent.Text, Text: chunk})
	}
	return nil
}

func withBigAgent(c *server.AppConfig) { c.Agent = bigAgent{} }

// A reply larger than a connection's whole queue budget (8 MiB) reaches
// every device, and a later sync replays it: the budget bounds the
// backlog, not the size of one frame.
func TestReplyLargerThanTheQueueBudget(t *testing.T) {
	g := testgw.Start(t, withBigAgent)
	a := g.Dial(t, "phone")
	from := a.Welcome().SyncCursor
	b := g.Dial(t, "tablet")
	send(t, b, def, "9")
	for _, d := range []*testgw.Device{a, b} {
		stop := d.Expect("message.stop", nil)
		if n := len(testgw.Str(t, stop, "final_text")); n != 9<<20 {
			t.Fatalf("%s: message.stop carries %d bytes, want %d", d.ID, n, 9<<20)
		}
		d.Expect("agent.idle", nil)
		d.MustDo("ping", client.Lane{}, nil) // still connected
	}
	c := g.Dial(t, "laptop")
	got := syncFrom(t, c, from)
	if n := count(got, "message.stop"); n != 1 {
		t.Fatalf("sync replayed %v", types(got))
	}
}

// A history page of long messages is bounded by bytes as well as by count:
// it holds the newest messages within gateway.MaxHistoryBytes (at least
// one), says has_more, and paging on from its oldest message reaches
// every message once.
func TestHistoryPageBoundedByBytes(t *testing.T) {
	g := testgw.Start(t, withBigAgent)
	a := g.Dial(t, "phone")
	for range 3 {
		send(t, a, def, "3")
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
	for i := range 12 {
		c := createChannel(t, a, "icons "+strconv.Itoa(i), "")
		_, err := a.Do("channel.icon", client.Lane{ChatID: c.ChatID}, map[string]any{"icon": icon})
		if err != nil {
			wantCode(t, err, "media_too_large")
			refused++
			continue
		}
		set++
	}
	if want := gateway.MaxDirectoryIcons / len(icon); set != want || refused != 12-want {
		t.Fatalf("%d icons set, %d refused; want %d set", set, refused, want)
	}
	b := g.Dial(t, "tablet")
	if n := len(b.Welcome().Channels); n != 13 {
		t.Fatalf("hello.ack lists %d channels", n)
	}
	if n := len(channels(t, b)); n != 13 {
		t.Fatalf("channel.list lists %d channels", n)
	}
}
