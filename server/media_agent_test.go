package server_test

// Media between devices and the agent: files a device attaches reach the
// agent, files the agent sends reach the devices, and a device's upload
// refs are its own.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/server"
)

// fileAgent answers every message with "noted: <text>", keeps the
// conversation like the model agent does, and sends the file named in
// files for a text (only the file, with no text, when the text starts
// with "silent").
type fileAgent struct {
	files map[string]string
	mu    sync.Mutex
	seen  []agent.Turn
}

func (f *fileAgent) Name() string { return "file agent" }

func (f *fileAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	f.mu.Lock()
	f.seen = append(f.seen, t)
	f.mu.Unlock()
	if t.Record != nil {
		t.Record(agent.Msg{Role: "user", Content: t.Input, MessageID: t.InputID})
	}
	if p := f.files[t.Input]; p != "" {
		emit(agent.Event{Kind: agent.File, Path: p})
	}
	if strings.HasPrefix(t.Input, "silent") {
		return nil
	}
	reply := "noted: " + t.Input
	emit(agent.Event{Kind: agent.Text, Text: reply})
	if t.Record != nil {
		t.Record(agent.Msg{Role: "assistant", Content: reply})
	}
	return nil
}

func (f *fileAgent) turns() []agent.Turn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

func TestAgentGetsAttachments(t *testing.T) {
	ag := &fileAgent{}
	g := testgw.Start(t, func(c *server.AppConfig) { c.Agent = ag })
	a := g.Dial(t, "phone")
	img := blob(5000, 40)
	upload(t, a, "pic", img, 1000, "kind", "image", "mime", "image/jpeg", "filename", "cat.jpg")
	if _, err := sendWith(t, a, def, "look", "pic"); err != nil {
		t.Fatal(err)
	}
	a.Expect("agent.idle", nil)
	ts := ag.turns()
	if len(ts) != 1 || len(ts[0].Media) != 1 {
		t.Fatalf("the agent got %d turns, media %+v", len(ts), ts)
	}
	m := ts[0].Media[0]
	if m.Kind != "image" || m.Mime != "image/jpeg" || m.Filename != "cat.jpg" || !strings.HasPrefix(m.ID, "md_") {
		t.Errorf("the agent's media: %+v", m)
	}
	if data, err := os.ReadFile(m.Path); err != nil || !bytes.Equal(data, img) {
		t.Errorf("the file at the agent's path %q: %v", m.Path, err)
	}
}

func TestAgentSendsFiles(t *testing.T) {
	dir := t.TempDir()
	report := []byte("%PDF-1.4 a report")
	chart := blob(20_000, 41)
	os.WriteFile(filepath.Join(dir, "report.pdf"), report, 0o600)
	os.WriteFile(filepath.Join(dir, "chart.png"), chart, 0o600)
	os.WriteFile(filepath.Join(dir, "huge.bin"), blob(testMax+1, 42), 0o600)
	ag := &fileAgent{files: map[string]string{
		"report": filepath.Join(dir, "report.pdf"), "silent chart": filepath.Join(dir, "chart.png"), "huge": filepath.Join(dir, "huge.bin"),
	}}
	g := testgw.Start(t, func(c *server.AppConfig) { c.Agent = ag }, mediaLimits(media.Limits{MaxSize: testMax}))
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	cursor := b.HelloAck().SyncCursor

	for _, c := range []struct {
		text, name, kind, mime, reply string
		data                          []byte
	}{
		{"report", "report.pdf", "document", "application/pdf", "noted: report", report},
		{"silent chart", "chart.png", "image", "image/png", "", chart},
	} {
		send(t, a, def, c.text)
		start := a.Expect("message.start", nil)
		replyID := testgw.Str(t, start, "message_id")
		offer := a.Expect("media.offer", nil)
		var om mediaItem
		offer.Decode(&om)
		if om.MessageID != replyID || om.Filename != c.name || om.Kind != c.kind || om.Mime != c.mime || om.Size != int64(len(c.data)) {
			t.Errorf("%s: offer %s (reply %s)", c.text, offer.Raw, replyID)
		}
		stop := a.Expect("message.stop", nil)
		if testgw.Str(t, stop, "final_text") != c.reply {
			t.Errorf("%s: the reply says %s", c.text, stop.Raw)
		}
		if ms := mediaOf(t, stop); len(ms) != 1 || ms[0].MediaID != om.MediaID {
			t.Errorf("%s: the final message lists %s, want the offered %s", c.text, stop.Raw, om.MediaID)
		}
		a.Expect("agent.idle", nil)
		if _, data, err := pull(t, b, om.MediaID); err != nil || !bytes.Equal(data, c.data) {
			t.Errorf("%s: pulled %d bytes, %v", c.text, len(data), err)
		}
		// History keeps the reply with its file.
		h := a.MustDo("history", def, map[string]any{"limit": 1})
		if !strings.Contains(string(h.Raw), om.MediaID) {
			t.Errorf("%s: history %s", c.text, h.Raw)
		}
	}
	// The offers are outboxed: a device that was away gets them.
	var offers int
	for _, f := range syncFrom(t, g.Dial(t, "laptop"), cursor) {
		if f.Type == "media.offer" {
			offers++
		}
	}
	if offers != 2 {
		t.Errorf("sync replayed %d offers, want 2", offers)
	}
	// A file over the limit is not offered; the person is told.
	send(t, a, def, "huge")
	sys := a.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "role") == "system" })
	if !strings.Contains(testgw.Str(t, sys, "text"), "huge.bin") {
		t.Errorf("system message %s", sys.Raw)
	}
	none(t, "phone", until(t, a, is(t, "agent.idle")), is(t, "media.offer"))
	// Deleting a reply deletes its file (the chart has no other message).
	if got := stored(t, g); len(got) != 2 {
		t.Fatalf("stored: %v", got)
	}
	h := a.MustDo("history", def, nil)
	var page histPage
	h.Decode(&page)
	var chartReply string
	for _, m := range page.Messages {
		if m.Role == "assistant" && m.Text == "" {
			chartReply = m.MessageID
		}
	}
	a.MustDo("message.delete", def, map[string]any{"message_ids": []string{chartReply}})
	barrier(t, a)
	if got := stored(t, g); len(got) != 1 || !strings.Contains(got[0], sum(report)) {
		t.Fatalf("after deleting the chart's reply: %v", got)
	}
	for _, f := range syncFrom(t, g.Dial(t, "watch"), cursor) {
		if f.Type == "media.offer" && strings.Contains(string(f.Raw), chartReply) {
			t.Errorf("the deleted reply's offer is still replayed: %s", f.Raw)
		}
	}
}

func TestMediaRefsBelongToTheirDevice(t *testing.T) {
	g := testgw.Start(t, mediaLimits(media.Limits{MaxSize: testMax}))
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	upload(t, a, "mine", []byte("hello"), 10)
	_, err := sendWith(t, b, def, "steal", "mine")
	wantCode(t, err, "not_found")
	_, err = sendWith(t, a, def, "typo", "mine", "nope")
	wantCode(t, err, "not_found")
	// Nothing was stored for the refused messages, and the good ref is
	// still there.
	if h, _ := history(t, a, def, nil); len(h.Messages) != 0 {
		t.Fatalf("refused messages in history: %+v", h.Messages)
	}
	if _, err := sendWith(t, a, def, "ok", "mine"); err != nil {
		t.Fatal(err)
	}
}
