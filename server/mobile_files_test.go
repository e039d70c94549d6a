package server_test

// Hermes Mobile files both ways and prompt cards closed elsewhere, over
// real WebSockets: the agent's files reach a phone as chunked media
// frames, a phone's files land in the media store and reach the agent and
// Iris devices as attachments, and a card answered (or given up) anywhere
// closes on the phone at once.

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/server"
)

// phoneFile is a file a phone assembled from media frames.
type phoneFile struct {
	id, kind, mime, filename, caption string
	data                              []byte
	parts                             int // received so far
}

// files reads until n whole files have come as media frames and returns
// them in the order they completed; every other frame is put back. Each
// file's frames must be its parts in order, with one id, kind, mime,
// filename, size and parts, the last (only) one final.
func (p *phone) files(n int) []phoneFile {
	p.t.Helper()
	var (
		done  []phoneFile
		other []mf
		open  = map[string]*phoneFile{}
		first = map[string]mf{}
	)
	deadline := time.Now().Add(mobileWait)
	for len(done) < n {
		f, ok := p.nextWithin(max(time.Until(deadline), 0))
		if !ok {
			p.t.Fatalf("phone: %d of %d files within %v (other frames: %s)", len(done), n, mobileWait, mtypes(other))
		}
		if f.T() != "media" {
			other = append(other, f)
			continue
		}
		id := f.S("id")
		pf := open[id]
		if pf == nil {
			pf = &phoneFile{id: id, kind: f.S("kind"), mime: f.S("mime"), filename: f.S("filename"), caption: f.S("caption")}
			open[id], first[id] = pf, f
		}
		h := first[id]
		for _, k := range []string{"kind", "mime", "filename"} {
			if f.S(k) != h.S(k) {
				p.t.Fatalf("media %s: %s changed within the file: %v then %v", id, k, h, f)
			}
		}
		if f.N("parts") != h.N("parts") || f.N("size") != h.N("size") {
			p.t.Fatalf("media %s: parts or size changed within the file", id)
		}
		b, err := base64.StdEncoding.DecodeString(f.S("data"))
		if err != nil {
			p.t.Fatalf("media %s: data: %v", id, err)
		}
		if f.N("part") != pf.parts {
			p.t.Fatalf("media %s: part %d after %d parts", id, f.N("part"), pf.parts)
		}
		pf.data = append(pf.data, b...)
		pf.parts++
		if f.B("final") != (f.N("part") == f.N("parts")-1) {
			p.t.Fatalf("media %s: final %v on part %d of %d", id, f.B("final"), f.N("part"), f.N("parts"))
		}
		if f.B("final") {
			if len(pf.data) != f.N("size") {
				p.t.Fatalf("media %s: %d bytes, size says %d", id, len(pf.data), f.N("size"))
			}
			done = append(done, *pf)
			delete(open, id)
		}
	}
	p.unread(other)
	return done
}

func TestMobileAgentFiles(t *testing.T) {
	dir := t.TempDir()
	chart := blob(20_000, 51)
	anim := append([]byte("GIF89a"), blob(1000, 52)...)
	report := blob(3<<20+512<<10, 53) // 3.5 MiB: two parts
	note := blob(3000, 54)
	big := blob(8<<20+1, 55) // one byte over the protocol's ceiling
	for name, b := range map[string][]byte{"chart.png": chart, "anim.gif": anim, "report.pdf": report, "note.ogg": note, "big.bin": big} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ag := &fileAgent{files: map[string]string{}}
	for _, name := range []string{"chart.png", "anim.gif", "report.pdf", "note.ogg", "big.bin"} {
		ag.files[name] = filepath.Join(dir, name)
	}
	ag.files["silent chart"] = filepath.Join(dir, "chart.png")
	g := mobileGW(t, withAgent(ag))
	laptop := g.Dial(t, "laptop")
	p := connectPhone(t, g, "tel-1")
	lane := client.Lane{ChatID: "mobile:tel-1"}

	var order []string
	for _, tc := range []struct {
		input, kind, mime, filename string
		data                        []byte
	}{
		{"chart.png", "image", "image/png", "chart.png", chart},
		{"anim.gif", "animation", "image/gif", "anim.gif", anim},
		{"report.pdf", "document", "application/pdf", "report.pdf", report},
		{"note.ogg", "voice", "audio/ogg", "note.ogg", note},
	} {
		t.Run(tc.input, func(t *testing.T) {
			p.send(text(seq("m"), tc.input))
			f := p.files(1)[0]
			order = append(order, f.id)
			if f.kind != tc.kind || f.mime != tc.mime || f.filename != tc.filename || !bytes.Equal(f.data, tc.data) {
				t.Fatalf("got %s %s %s, %d bytes; want %s %s %s, %d bytes", f.kind, f.mime, f.filename, len(f.data), tc.kind, tc.mime, tc.filename, len(tc.data))
			}
			p.finalText("noted: " + tc.input)
			// The phone's file is the one Iris devices are offered and
			// can pull.
			offer := laptop.Expect("media.offer", func(fr client.Frame) bool { return fr.ChatID == lane.ChatID })
			var om mediaItem
			offer.Decode(&om)
			if om.MediaID != f.id {
				t.Fatalf("the laptop was offered %s, the phone got %s", om.MediaID, f.id)
			}
			if _, data, err := pull(t, laptop, om.MediaID); err != nil || !bytes.Equal(data, tc.data) {
				t.Fatalf("the laptop pulled %d bytes: %v", len(data), err)
			}
		})
	}
	t.Run("a file without text is sent all the same", func(t *testing.T) {
		p.send(text(seq("m"), "silent chart"))
		f := p.files(1)[0]
		order = append(order, f.id)
		if f.kind != "image" || !bytes.Equal(f.data, chart) {
			t.Fatalf("got %s, %d bytes", f.kind, len(f.data))
		}
	})
	t.Run("a file over 8 MiB is named, not sent", func(t *testing.T) {
		p.send(text(seq("m"), "big.bin"))
		// The reply and the note about the file come in either order.
		var got []string
		for len(got) < 2 {
			_, s, _ := p.reply()
			got = append(got, s)
		}
		slices.Sort(got) // "noted: …" first
		if got[0] != "noted: big.bin" || !strings.HasPrefix(got[1], "📎 big.bin (8.0 MiB) is larger than the 8 MiB this app takes") {
			t.Fatalf("the phone was told %q", got)
		}
	})
	// Each file went once, though each was both offered and listed in its
	// reply: files are sent in order, so a repeat of one would have come
	// before the next.
	p.send(text(seq("m"), "chart.png"))
	last := p.files(1)[0]
	order = append(order, last.id)
	uniq := slices.Clone(order)
	slices.Sort(uniq)
	if len(slices.Compact(uniq)) != len(order) {
		t.Fatalf("files sent more than once: %v", order)
	}
	if fs := p.barrier(); countT(fs, "media") != 0 || countT(fs, "error") != 0 {
		t.Fatalf("after the files: %s", mtypes(fs))
	}
}

// keeperGW starts a gateway whose agent records its turns (and answers
// "noted: <input>").
func keeperGW(t *testing.T, edit ...func(*server.AppConfig)) (*testgw.GW, *fileAgent) {
	t.Helper()
	ag := &fileAgent{}
	return mobileGW(t, append([]func(*server.AppConfig){withAgent(ag)}, edit...)...), ag
}

// lastTurn waits for the agent's n-th turn and returns it.
func lastTurn(t *testing.T, ag *fileAgent, n int) agent.Turn {
	t.Helper()
	eventually(t, "the agent's turn", func() bool { return len(ag.turns()) >= n })
	ts := ag.turns()
	if len(ts) != n {
		t.Fatalf("the agent got %d turns, want %d", len(ts), n)
	}
	return ts[n-1]
}

func TestMobileFilesStored(t *testing.T) {
	g, ag := keeperGW(t)
	laptop := g.Dial(t, "laptop")
	p := connectPhone(t, g, "tel-1")
	lane := client.Lane{ChatID: "mobile:tel-1"}
	turns := 0

	// check asserts the agent's newest turn: its text and its one file,
	// which the laptop sees on the phone's message and can pull.
	check := func(t *testing.T, input, kind, mime, filename string, data []byte) {
		t.Helper()
		turns++
		turn := lastTurn(t, ag, turns)
		if turn.Input != input || len(turn.Media) != 1 {
			t.Fatalf("the agent got %q with %d files", turn.Input, len(turn.Media))
		}
		m := turn.Media[0]
		if m.Kind != kind || m.Mime != mime || m.Filename != filename || m.Size != int64(len(data)) || !strings.HasPrefix(m.ID, "md_") {
			t.Fatalf("the agent's file: %+v", m)
		}
		if b, err := os.ReadFile(m.Path); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("the file at the agent's path %q: %d bytes, %v", m.Path, len(b), err)
		}
		msg := laptop.Expect("message", func(f client.Frame) bool {
			return f.ChatID == lane.ChatID && testgw.Str(t, f, "role") == "user"
		})
		ms := mediaOf(t, msg)
		if testgw.Str(t, msg, "text") != input || len(ms) != 1 || ms[0].MediaID != m.ID || ms[0].Kind != kind || ms[0].Filename != filename {
			t.Fatalf("the laptop saw %s", msg.Raw)
		}
		if _, b, err := pull(t, laptop, m.ID); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("the laptop pulled %d bytes: %v", len(b), err)
		}
	}

	t.Run("one frame", func(t *testing.T) {
		img := blob(1500, 61)
		p.send(map[string]any{"t": "media", "id": "f1", "kind": "image", "mime": "image/jpeg", "filename": "cat.jpg", "caption": "my cat",
			"data": b64s(base64.StdEncoding.EncodeToString(img))})
		check(t, "my cat", "image", "image/jpeg", "cat.jpg", img)
	})
	t.Run("chunks, out of order, assembled in order", func(t *testing.T) {
		parts := [][]byte{blob(300<<10, 62), blob(124<<10, 63), blob(300<<10, 64)}
		for _, i := range []int{0, 2, 1} {
			f := map[string]any{"t": "media", "id": "f2", "kind": "video", "data": b64s(base64.StdEncoding.EncodeToString(parts[i])), "part": i, "parts": 3}
			if i == 0 {
				f["mime"], f["filename"], f["caption"] = "video/mp4", "v.mp4", "clip"
			}
			p.send(f)
		}
		check(t, "clip", "video", "video/mp4", "v.mp4", bytes.Join(parts, nil))
	})
	t.Run("mime from the filename", func(t *testing.T) {
		doc := []byte("%PDF-1.4 tiny")
		p.send(map[string]any{"t": "media", "id": "f3", "kind": "document", "filename": "r.pdf", "data": b64s(base64.StdEncoding.EncodeToString(doc))})
		check(t, "", "document", "application/pdf", "r.pdf", doc)
	})
	t.Run("a file without a name is named after its kind", func(t *testing.T) {
		png := append([]byte("\x89PNG\r\n\x1a\n"), blob(100, 67)...)
		p.send(map[string]any{"t": "media", "id": "f3b", "kind": "image", "mime": "image/png", "caption": "screenshot", "data": b64s(base64.StdEncoding.EncodeToString(png))})
		check(t, "screenshot", "image", "image/png", "image.png", png)
	})
	t.Run("audio with recognised text", func(t *testing.T) {
		rec := blob(2048, 65)
		p.send(map[string]any{"t": "audio", "id": "a1", "format": "ogg", "text": "turn on the lights", "data": b64s(base64.StdEncoding.EncodeToString(rec))})
		check(t, "turn on the lights", "voice", "audio/ogg", "voice.ogg", rec)
	})
	t.Run("audio alone", func(t *testing.T) {
		rec := blob(100, 66)
		p.send(map[string]any{"t": "audio", "id": "a2", "format": "WAV", "data": b64s(base64.StdEncoding.EncodeToString(rec))})
		check(t, "", "voice", "audio/wav", "voice.wav", rec)
	})
	t.Run("a file sent again is stored and sent once", func(t *testing.T) {
		for range 2 {
			p.send(map[string]any{"t": "media", "id": "f1", "kind": "image", "mime": "image/jpeg", "filename": "cat.jpg", "caption": "my cat",
				"data": b64s(base64.StdEncoding.EncodeToString(blob(1500, 61)))})
			p.send(map[string]any{"t": "audio", "id": "a2", "format": "wav", "data": b64s(base64.StdEncoding.EncodeToString(blob(100, 66)))})
		}
		p.send(text("t1", "after the repeats"))
		p.finalText("noted: after the repeats")
		if turn := lastTurn(t, ag, turns+1); turn.Input != "after the repeats" {
			t.Fatalf("the agent got %q", turn.Input)
		}
		turns++
		// Every file kept was attached: no upload is left over.
		left, err := g.App.Store.ExpireUploads(context.Background(), time.Now().Add(time.Hour).UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Fatalf("%d uploads were stored and never attached", left)
		}
	})
}

func TestMobileFileOverTheStoreLimit(t *testing.T) {
	g, ag := keeperGW(t, mediaLimits(media.Limits{MaxSize: 1000}))
	p := connectPhone(t, g, "tel-1")
	e := p.wantError(map[string]any{"t": "media", "id": "f1", "kind": "document", "filename": "a.bin", "data": b64(1001)}, "too_big")
	if e.S("id") != "f1" {
		t.Fatalf("error = %v", e)
	}
	// Refused is not handled: the same id goes through once it fits.
	p.send(map[string]any{"t": "media", "id": "f1", "kind": "document", "filename": "a.bin", "data": b64(1000)})
	if turn := lastTurn(t, ag, 1); len(turn.Media) != 1 || turn.Media[0].Size != 1000 {
		t.Fatalf("the agent's turn: %+v", turn)
	}
	if got := stored(t, g); len(got) != 1 {
		t.Fatalf("stored: %v", got)
	}
}

// TestMobileCardClosedElsewhere: a card a phone shows closes the moment
// its picker does, wherever that happened: an Iris device answered it,
// the agent's question timed out, or the turn was stopped.
func TestMobileCardClosedElsewhere(t *testing.T) {
	g := mobileGW(t, withAgent(askAgent{}))
	laptop := g.Dial(t, "laptop")
	p := connectPhone(t, g, "tel-1")
	lane := client.Lane{ChatID: "mobile:tel-1"}

	// card asks through phone p and returns its card, checking that the
	// laptop was shown the same picker.
	card := func(p *phone, laptop *testgw.Device, input, picker string) mf {
		t.Helper()
		p.send(text(seq("m"), input))
		c := p.expect("prompt", nil)
		pk := laptop.Expect(picker, func(f client.Frame) bool { return f.ChatID == lane.ChatID })
		if id := testgw.Str(t, pk, "picker_id"); id != c.S("id") {
			t.Fatalf("the laptop's picker %s, the phone's card %s", id, c.S("id"))
		}
		return c
	}
	// done reads the card's prompt_done; what came before it stays to be
	// read.
	done := func(p *phone, c mf) mf {
		t.Helper()
		fs := p.until(func(f mf) bool { return f.T() == "prompt_done" && f.S("id") == c.S("id") })
		p.unread(fs[:len(fs)-1])
		return fs[len(fs)-1]
	}

	t.Run("an approval answered on the laptop", func(t *testing.T) {
		c := card(p, laptop, "approve a", "picker.approval")
		ans := laptop.MustDo("picker.select", client.Lane{}, map[string]any{"picker_id": c.S("id"), "value": "session"})
		if ans.Type != "message" || ans.ChatID != lane.ChatID {
			t.Fatalf("picker.select answered %s", ans.Raw)
		}
		if d := done(p, c); d.S("option_id") != "session" || d.B("expired") {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("approval: session")
		// The phone's own answer now finds the card closed.
		p.send(map[string]any{"t": "prompt", "prompt_id": c.S("id"), "option_id": "deny"})
		if d := done(p, c); !d.B("expired") {
			t.Fatalf("a late answer: %v", d)
		}
	})
	t.Run("a question answered on the laptop", func(t *testing.T) {
		c := card(p, laptop, "clarify", "picker.clarify")
		laptop.MustDo("picker.select", client.Lane{}, map[string]any{"picker_id": c.S("id"), "value": "green"})
		if d := done(p, c); d.S("option_id") != "c1" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("answer: green")
		c = card(p, laptop, "clarify", "picker.clarify")
		laptop.MustDo("picker.select", client.Lane{}, map[string]any{"picker_id": c.S("id"), "value": "mauve"})
		if d := done(p, c); d.S("option_id") != "other" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("answer: mauve")
	})
	t.Run("the turn was stopped", func(t *testing.T) {
		c := card(p, laptop, "approve c", "picker.approval")
		laptop.MustDo("agent.stop", lane, nil)
		if d := done(p, c); !d.B("expired") {
			t.Fatalf("prompt_done = %v", d)
		}
	})
	t.Run("the phone answers: one prompt_done", func(t *testing.T) {
		c := card(p, laptop, "approve d", "picker.approval")
		p.send(map[string]any{"t": "prompt", "prompt_id": c.S("id"), "option_id": "once"})
		if d := done(p, c); d.S("option_id") != "once" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("approval: once")
		if fs := p.barrier(); countT(fs, "prompt_done") != 0 {
			t.Fatalf("a second prompt_done: %s", mtypes(fs))
		}
	})
	t.Run("the question timed out", func(t *testing.T) {
		// The agent's question waits 300 ms here; the card, 300 s.
		g := mobileGW(t, withAgent(askAgent{}), func(c *server.AppConfig) { c.AskTimeout = 300 * time.Millisecond })
		laptop := g.Dial(t, "laptop")
		p := connectPhone(t, g, "tel-1")
		c := card(p, laptop, "approve b", "picker.approval")
		if c.N("timeout_seconds") != 300 {
			t.Fatalf("card = %v", c)
		}
		if d := done(p, c); !d.B("expired") || d.S("option_id") != "" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("approval: deny")
	})
}
