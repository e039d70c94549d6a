package mobile

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/mobilev1"
)

func decodeOut(t *testing.T, o hub.Out) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(o.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMessageFrames(t *testing.T) {
	text := strings.Repeat("x", 2*mobilev1.ChunkChars+1)
	for _, tc := range []struct {
		edit, final bool
	}{{false, true}, {false, false}, {true, false}, {true, true}} {
		outs := messageFrames("m_1", text, tc.edit, tc.final)
		if len(outs) != 3 {
			t.Fatalf("%d frames", len(outs))
		}
		var got strings.Builder
		for i, o := range outs {
			m := decodeOut(t, o)
			ch := m["chunk"].(map[string]any)
			if m["t"] != "message" || m["id"] != "m_1" || ch["index"] != float64(i) || ch["total"] != float64(3) {
				t.Fatalf("frame %d: %s", i, o.Data)
			}
			if m["final"] != (tc.final && i == 2) {
				t.Fatalf("frame %d final: %s", i, o.Data)
			}
			if e, _ := m["edit"].(bool); e != tc.edit {
				t.Fatalf("frame %d edit: %s", i, o.Data)
			}
			if (o.Key != "") != (tc.edit && !tc.final) {
				t.Fatalf("frame %d key %q (edit %v final %v)", i, o.Key, tc.edit, tc.final)
			}
			got.WriteString(m["text"].(string))
		}
		if got.String() != text {
			t.Fatal("chunks do not concatenate to the text")
		}
	}
}

func TestMediaFrames(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 25)
	var frames []map[string]any
	h := mobilev1.MediaOut{ID: "md_1", Kind: "image", Mime: "image/png", Filename: "a.png", Caption: "cap"}
	err := mediaFrames(h, int64(len(data)), bytes.NewReader(data), 100, func(o hub.Out) error {
		frames = append(frames, decodeOut(t, o))
		return nil
	})
	if err != nil || len(frames) != 3 {
		t.Fatalf("%d frames, %v", len(frames), err)
	}
	var got []byte
	for i, f := range frames {
		if f["t"] != "media" || f["id"] != "md_1" || f["part"] != float64(i) || f["parts"] != float64(3) || f["size"] != float64(250) ||
			f["final"] != (i == 2) || f["kind"] != "image" || f["mime"] != "image/png" || f["filename"] != "a.png" {
			t.Fatalf("frame %d: %v", i, f)
		}
		if (f["caption"] == "cap") != (i == 0) {
			t.Fatalf("caption on frame %d: %v", i, f)
		}
		b, _ := base64.StdEncoding.DecodeString(f["data"].(string))
		got = append(got, b...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("chunks do not reassemble the file")
	}
	// An empty file is one final part with empty data.
	frames = nil
	mediaFrames(h, 0, bytes.NewReader(nil), 100, func(o hub.Out) error { frames = append(frames, decodeOut(t, o)); return nil })
	if len(frames) != 1 || frames[0]["final"] != true || frames[0]["data"] != "" || frames[0]["parts"] != float64(1) {
		t.Fatalf("empty file: %v", frames)
	}
	// A file shorter than its size fails: the device must not get a final
	// part that does not complete the file.
	frames = nil
	err = mediaFrames(h, 250, bytes.NewReader(data[:150]), 100, func(o hub.Out) error { frames = append(frames, decodeOut(t, o)); return nil })
	if err == nil || len(frames) != 1 {
		t.Fatalf("short file: %d frames, %v", len(frames), err)
	}
	// A chunk of the default size fits in half the default send queue.
	full := bytes.Repeat([]byte{1}, downChunkBytes)
	mediaFrames(mobilev1.MediaOut{ID: "md_" + strings.Repeat("x", 16), Kind: "document", Mime: "application/octet-stream", Filename: strings.Repeat("f", mobilev1.MaxFilenameChars)},
		int64(len(full)), bytes.NewReader(full), downChunkBytes,
		func(o hub.Out) error {
			if len(o.Data) > hub.DefaultLimits.MaxBytes/2 {
				t.Errorf("a %d-byte chunk is a %d-byte frame, more than half the send queue", downChunkBytes, len(o.Data))
			}
			return nil
		})
}

func TestOutKind(t *testing.T) {
	for _, tc := range []struct{ kind, mime, want string }{
		{"image", "image/png", "image"},
		{"image", "image/gif", "animation"},
		{"video", "video/mp4", "video"},
		{"audio", "audio/mpeg", "voice"},
		{"voice", "audio/ogg", "voice"},
		{"voice", "application/octet-stream", "voice"},
		{"audio", "application/octet-stream", "voice"},
		{"document", "application/pdf", "document"},
		{"document", "text/plain", "document"},
	} {
		if got := outKind(tc.kind, tc.mime); got != tc.want {
			t.Errorf("outKind(%s, %s) = %s, want %s", tc.kind, tc.mime, got, tc.want)
		}
	}
}

func TestCardDoneFrame(t *testing.T) {
	d := New(Config{})
	defer d.Close()
	clarify := &core.Picker{ID: "pk_c", Kind: "clarify", Title: "Which?", Choices: []core.Choice{{Value: "red", Label: "Red"}, {Value: "green"}}}
	approval := &core.Picker{ID: "pk_a", Kind: "approval", Choices: []core.Choice{{Value: "once"}, {Value: "deny"}}}
	d.cards.open("mobile:a", "mobile:a", clarify)
	d.cards.open("mobile:a", "mobile:a", approval)
	if c := d.cards.take("pk_c", "mobile:b"); c != nil {
		t.Fatal("a card was taken by a device it was not shown to")
	}
	for _, tc := range []struct {
		id, value, want string
	}{
		{"pk_c", "green", `{"t":"prompt_done","id":"pk_c","option_id":"c1"}`},
		{"pk_c", "mauve", `{"t":"prompt_done","id":"pk_c","option_id":"other"}`},
		{"pk_c", "", `{"t":"prompt_done","id":"pk_c","expired":true}`},
		{"pk_a", "deny", `{"t":"prompt_done","id":"pk_a","option_id":"deny"}`},
	} {
		c := d.cards.get(tc.id)
		if got := string(c.doneFrame(tc.value)); got != tc.want {
			t.Errorf("%s closed with %q: %s, want %s", tc.id, tc.value, got, tc.want)
		}
	}
	if c := d.cards.take("pk_a", "mobile:a"); c == nil || d.cards.get("pk_a") != nil || d.cards.take("pk_a", "mobile:a") != nil {
		t.Fatal("a card is taken once")
	}
}

func TestCardOptions(t *testing.T) {
	approval := &core.Picker{ID: "pk_1", Kind: "approval", Title: "Run this command?", Command: "rm -rf /tmp/x", Description: "removes x",
		Choices: []core.Choice{{Value: "once", Label: "Allow once"}, {Value: "session", Label: "Session"}, {Value: "always", Label: "Always"}, {Value: "deny", Label: "Deny"}}}
	confirm := &core.Picker{ID: "pk_2", Kind: "confirm", Title: "Start a new session?",
		Choices: []core.Choice{{Value: "once", Label: "Start new session"}, {Value: "cancel", Label: "Cancel"}}}
	clarify := &core.Picker{ID: "pk_3", Kind: "clarify", Title: "Which colour?",
		Choices: []core.Choice{{Value: "red", Label: "Red"}, {Value: "green", Label: "Green"}}}
	model := &core.Picker{ID: "pk_4", Kind: "model", Title: "Model",
		Providers: []core.Provider{{ID: "openai", Label: "OpenAI", Models: []core.Choice{{Value: "gpt-5", Label: "GPT-5"}}}}}
	ids := func(opts []option) string {
		var s []string
		for _, o := range opts {
			s = append(s, o.ID+"="+o.Value)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		p          *core.Picker
		kind, opts string
	}{
		{approval, "exec_approval", "once=once,session=session,always=always,deny=deny"},
		{confirm, "slash_confirm", "once=once,cancel=cancel"},
		{&core.Picker{Kind: "confirm"}, "slash_confirm", "once=once,always=always,cancel=cancel"},
		{clarify, "clarify", "c0=red,c1=green,other="},
		{&core.Picker{Kind: "choice", Choices: []core.Choice{{Value: "on"}, {Value: "off"}}}, "clarify", "c0=on,c1=off,other="},
		{model, "clarify", "c0=openai/gpt-5,other="},
	} {
		kind, opts, ok := cardOptions(tc.p)
		if !ok || kind != tc.kind || ids(opts) != tc.opts {
			t.Errorf("%s picker → %s [%s], want %s [%s]", tc.p.Kind, kind, ids(opts), tc.kind, tc.opts)
		}
	}
	if _, _, ok := cardOptions(&core.Picker{Kind: "unknown"}); ok {
		t.Error("a picker kind the protocol has no card for got one")
	}

	mk := func(p *core.Picker) *card {
		kind, opts, _ := cardOptions(p)
		return &card{id: p.ID, kind: kind, options: opts}
	}
	for _, tc := range []struct {
		c              *card
		option, text   string
		applied, value string
		needText       bool
		name           string
	}{
		{mk(approval), "always", "", "always", "always", false, "approval option"},
		{mk(approval), "sudo-everything", "", "deny", "deny", false, "approval: unknown option is deny"},
		{mk(approval), "", "Once", "once", "once", false, "approval: text instead of option_id"},
		{mk(confirm), "once", "", "once", "once", false, "confirm option"},
		{mk(confirm), "always", "", "cancel", "cancel", false, "confirm: an option this card lacks is cancel"},
		{mk(clarify), "c1", "", "c1", "green", false, "clarify option"},
		{mk(clarify), "c7", "", "other", "", true, "clarify: unknown option asks for text"},
		{mk(clarify), "other", "", "other", "", true, "clarify: other without text asks for text"},
		{mk(clarify), "other", "blue", "other", "blue", false, "clarify: other with text"},
		{mk(clarify), "", "Red", "c0", "red", false, "clarify: typed text naming an option"},
	} {
		applied, value, need := tc.c.resolve(tc.option, tc.text)
		if applied != tc.applied || value != tc.value || need != tc.needText {
			t.Errorf("%s: resolve(%q, %q) = %q, %q, %v; want %q, %q, %v", tc.name, tc.option, tc.text, applied, value, need, tc.applied, tc.value, tc.needText)
		}
	}
}

func TestCardFrame(t *testing.T) {
	d := New(Config{Settings: Settings{PromptTTL: time.Minute}})
	defer d.Close()
	p := &core.Picker{ID: "pk_1", Kind: "approval", Title: "Run this command?", Command: "ls", Description: "lists"}
	data := d.cards.open("mobile:a", "mobile:a", p)
	var f mobilev1.Prompt
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if f.T != "prompt" || f.ID != "pk_1" || f.Kind != "exec_approval" || f.Command != "ls" || f.Description != "lists" ||
		f.Session != "mobile:a" || f.TimeoutSeconds != 60 || len(f.Options) != 4 || f.Options[3].Style != "danger" {
		t.Fatalf("card: %s", data)
	}
	if c := d.cards.get("pk_1"); c == nil || c.device != "mobile:a" {
		t.Fatal("card not registered")
	}
	// Shown again (a reconnect): same card, same deadline.
	d.cards.open("mobile:a", "mobile:a", p)
	if n := len(d.cards.of("mobile:a")); n != 1 {
		t.Fatalf("%d cards after showing one twice", n)
	}
	// The per-device bound.
	for i := range maxCardsPerDevice + 5 {
		d.cards.open("mobile:b", "mobile:b", &core.Picker{ID: fmt.Sprintf("pk_b%d", i), Kind: "clarify"})
	}
	if n := len(d.cards.of("mobile:b")); n != maxCardsPerDevice-1+1 {
		t.Fatalf("%d cards kept, want %d", n, maxCardsPerDevice)
	}
}

func TestDedupe(t *testing.T) {
	now := time.Unix(1000, 0)
	d := newDedupe(time.Minute, 3)
	d.now = func() time.Time { return now }
	if !d.claim("a") || d.claim("a") {
		t.Fatal("a key is claimed once")
	}
	d.release("a")
	if !d.claim("a") {
		t.Fatal("a released key is free again")
	}
	d.claim("b")
	d.claim("c")
	d.claim("d") // evicts a, the oldest
	if d.seen("a") || !d.seen("b") || d.len() != 3 {
		t.Fatalf("bounded LRU: seen(a)=%v seen(b)=%v len=%d", d.seen("a"), d.seen("b"), d.len())
	}
	now = now.Add(time.Minute)
	if d.seen("b") || d.len() != 0 {
		t.Fatal("keys outlived the window")
	}
	if !d.claim("b") {
		t.Fatal("an expired key is new again")
	}
}
