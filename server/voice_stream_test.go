package server_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/fakespeech"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// Voice out as the reply streams, end to end: the model is the fake
// OpenAI-compatible server, the speech the fake /v1/audio/speech (real
// WAV files), a Hermes Mobile phone and an Iris laptop on real sockets.

const (
	phoneLane = "mobile:tel-1"
	// Sentences of a reply: the first is a piece of its own (over 60
	// characters), the others together (each piece may be twice the last).
	said1 = "Good morning, the weather today is bright and the roads are clear."
	said2 = "Your first meeting is at ten, in the small room on the third floor."
	said3 = "Bring the printed notes, the projector there has been broken for weeks"
)

// voiceRig is a model-backed gateway speaking through tts, with a phone
// whose lane has /voice on and a laptop.
func voiceRig(t *testing.T, tts *fakespeech.TTS) (*agRig, *phone, *testgw.Device) {
	t.Helper()
	r := agStart(t, agWithApp(withTTS(t, tts)), agWithApp(func(c *server.AppConfig) { c.Server.Mobile.AvatarQuiet = 100 * time.Millisecond }))
	laptop := r.dial("laptop")
	p := connectPhone(t, r.g, "tel-1")
	p.send(map[string]any{"t": "text", "id": seq("v"), "text": "/voice on"})
	p.expect("message", func(f mf) bool { return strings.Contains(f.S("text"), "Voice replies on") })
	laneSays(t, laptop, phoneLane, "Voice replies on")
	return r, p, laptop
}

// heldReply streams parts as the model's reply, holding the stream after
// the first until hold gets a value.
func heldReply(hold chan struct{}, parts ...string) fakeopenai.Script {
	chunks := fakeopenai.Text(parts[0], 1)[:2] // the role, the first part
	for _, p := range parts[1:] {
		chunks = append(chunks, fakeopenai.Text(p, 1)[1])
	}
	chunks = append(chunks, fakeopenai.Text("", 1)[1:]...) // the stop, the usage
	return fakeopenai.Script{Chunks: chunks, Hold: hold, HoldAfter: 2}
}

// voicePiece is a file a phone reassembled from media frames.
type voicePiece struct {
	id, mime, filename string
	data               []byte
	parts              int // chunks gathered
}

// voiceFiles gathers the phone's voice files from frames, checking each
// chunk's numbering, size and final flag as the protocol has them.
func voiceFiles(t *testing.T, frames []mf) (done []voicePiece) {
	t.Helper()
	open := map[string]*voicePiece{}
	for _, f := range frames {
		if f.T() != "media" {
			continue
		}
		if f.S("kind") != "voice" {
			t.Fatalf("a media frame of kind %q", f.S("kind"))
		}
		id := f.S("id")
		v := open[id]
		if v == nil {
			v = &voicePiece{id: id, mime: f.S("mime"), filename: f.S("filename")}
			open[id] = v
		}
		b, err := base64.StdEncoding.DecodeString(f.S("data"))
		if err != nil || f.N("part") != v.parts {
			t.Fatalf("media frame %s (part %d expected): %v", f, v.parts, err)
		}
		v.data = append(v.data, b...)
		v.parts++
		if f.N("part") == f.N("parts")-1 != f.B("final") {
			t.Fatalf("media frame %s: final on the wrong part", f)
		}
		if f.B("final") {
			if len(v.data) != f.N("size") {
				t.Fatalf("voice %s: %d bytes, size says %d", id, len(v.data), f.N("size"))
			}
			done = append(done, *v)
			delete(open, id)
		}
	}
	return done
}

// TestVoiceStreamsToHermesMobile: with /voice on, the phone gets the
// reply's first spoken piece while the model still holds its stream open,
// as media of kind voice in parts (the first piece is over the dialect's
// 3 MiB chunk) that reassemble into the WAV the TTS made of that
// sentence; then the rest. The avatar speaks before the first voice frame
// and does not leave speaking until the last has come, then rests. The
// laptop gets each piece offered, tied to the reply, pulls the same bytes,
// and the final message lists them all.
func TestVoiceStreamsToHermesMobile(t *testing.T) {
	tts := &fakespeech.TTS{Rate: 2_400_000, Samples: func(in string) int {
		if in == said1 {
			return 1_700_000 // 3.4 MB (two media parts) that plays for 0.7 s
		}
		return 10 * len(in)
	}}
	r, p, laptop := voiceRig(t, tts)
	hold := make(chan struct{})
	r.script(heldReply(hold, said1+" ", said2+" ", said3))
	p.send(map[string]any{"t": "text", "id": seq("m"), "text": "what is on today?"})

	// The first piece, whole, while the model's stream is held.
	before := p.until(func(f mf) bool { return f.T() == "media" && f.B("final") })
	for _, f := range before {
		if f.T() == "message" && f.B("final") {
			t.Fatalf("the reply finished before its first voice piece: %s", mtypes(before))
		}
	}
	lastAvatar := ""
	for _, f := range before {
		if f.T() == "avatar" {
			lastAvatar = f.S("state")
		}
		if f.T() == "media" {
			break
		}
	}
	if lastAvatar != "speaking" {
		t.Fatalf("the avatar was %q at the first voice frame: %s", lastAvatar, mtypes(before))
	}
	first := voiceFiles(t, before)
	if len(first) != 1 || !bytes.Equal(first[0].data, tts.Audio(said1)) || first[0].mime != "audio/wav" || first[0].filename != "reply-1.wav" {
		t.Fatalf("the first voice piece: %d files", len(first))
	}
	if n := countT(before, "media"); n != 2 {
		t.Fatalf("the first piece came in %d media frames, want 2", n)
	}
	hold <- struct{}{}

	// The rest: the final text, and the voice pieces until every one the
	// TTS made has come.
	var after []mf
	pieces := first
	final := false
	for !final || len(pieces) < len(tts.Requests()) {
		f := p.next()
		after = append(after, f)
		if f.T() == "message" && f.B("final") {
			final = true
		}
		pieces = append(pieces, voiceFiles(t, []mf{f})...)
	}
	reqs := tts.Requests()
	var spoken []string
	for i, rq := range reqs {
		spoken = append(spoken, rq.Input)
		if !bytes.Equal(pieces[i].data, tts.Audio(rq.Input)) {
			t.Fatalf("voice piece %d is not the speech of %q", i+1, rq.Input)
		}
		if _, _, err := fakespeech.ParseWAV(pieces[i].data); err != nil {
			t.Fatalf("voice piece %d: %v", i+1, err)
		}
	}
	if len(reqs) != 2 || strings.Join(spoken, " ") != said1+" "+said2+" "+said3 {
		t.Fatalf("spoken in %d pieces: %q", len(reqs), spoken)
	}
	for _, f := range after {
		if f.T() == "avatar" && f.S("state") != "speaking" {
			t.Fatalf("the avatar went %q before the last voice piece: %s", f.S("state"), mtypes(after))
		}
	}
	p.expect("avatar", func(f mf) bool { return f.S("state") == "idle" })

	// The laptop: each piece offered as it was made, then listed.
	got := until(t, laptop, func(f client.Frame) bool { return f.Type == "message.stop" && f.ChatID == phoneLane })
	stop := got[len(got)-1]
	listed := mediaOf(t, stop)
	var offers []mediaItem
	for _, f := range got {
		if f.Type == "media.offer" && f.ChatID == phoneLane {
			var m mediaItem
			if err := f.Decode(&m); err != nil {
				t.Fatal(err)
			}
			offers = append(offers, m)
		}
	}
	id := testgw.Str(t, stop, "message_id")
	if len(listed) != 2 || len(offers) != 2 || offers[0].MessageID != id || offers[0].MediaID != listed[0].MediaID || offers[1].MediaID != listed[1].MediaID {
		t.Fatalf("offers %+v, listed %+v", offers, listed)
	}
	for i, m := range listed {
		if m.Kind != "audio" || m.Mime != "audio/wav" || m.MediaID != pieces[i].id {
			t.Fatalf("listed %+v, the phone got %s", m, pieces[i].id)
		}
		if _, b, err := pull(t, laptop, m.MediaID); err != nil || !bytes.Equal(b, pieces[i].data) {
			t.Fatalf("piece %d pulled: %d bytes, %v", i+1, len(b), err)
		}
	}
}

// TestVoiceStoppedMidSpeech: the text has all come and the second piece
// is being spoken when the laptop stops the turn: that request is given
// up, the reply keeps its whole text and its first piece, the lane is
// told nothing of speech, and the phone's avatar rests.
func TestVoiceStoppedMidSpeech(t *testing.T) {
	tts := &fakespeech.TTS{Hold: make(chan struct{}), HoldFrom: 2, Taken: make(chan fakespeech.Speech, 8)}
	r, p, laptop := voiceRig(t, tts)
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text(said1+" "+said2+" "+said3, 6)})
	p.send(map[string]any{"t": "text", "id": seq("m"), "text": "what is on today?"})
	for range 2 {
		select {
		case <-tts.Taken:
		case <-time.After(testgw.Wait):
			t.Fatal("the second piece was not asked for")
		}
	}
	idle := laptop.MustDo("agent.stop", client.Lane{ChatID: phoneLane}, nil)
	if idle.Type != "agent.idle" {
		t.Fatalf("agent.stop answered %s", idle.Raw)
	}
	got := until(t, laptop, reply(idle.ID))
	var stop client.Frame
	for _, f := range got {
		switch {
		case f.Type == "message.stop":
			stop = f
		case f.Type == "message" && testgw.Str(t, f, "role") == "system":
			t.Fatalf("the lane was told %s", f.Raw)
		}
	}
	if stop.Type == "" || testgw.Str(t, stop, "final_text") != said1+" "+said2+" "+said3 || len(mediaOf(t, stop)) != 1 {
		t.Fatalf("the reply: %s", stop.Raw)
	}
	if n := tts.WaitCancelled(1, testgw.Wait); n != 1 {
		t.Fatalf("%d speech requests given up, want 1", n)
	}
	frames := p.until(func(f mf) bool { return f.T() == "avatar" && f.S("state") == "idle" })
	if n := len(voiceFiles(t, frames)); n != 1 {
		t.Fatalf("the phone got %d voice pieces", n)
	}
}

// TestVoiceTTSFailsMidReply: the TTS server fails at the second piece:
// the first stays with the reply, nothing more is asked for, the text is
// whole, and both devices are told why once.
func TestVoiceTTSFailsMidReply(t *testing.T) {
	tts := &fakespeech.TTS{FailFrom: 2}
	r, p, laptop := voiceRig(t, tts)
	text := strings.Join([]string{said1, said2, said3 + ".", said1, said2, said3 + ".", said1, said2}, " ")
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text(text, 12)})
	p.send(map[string]any{"t": "text", "id": seq("m"), "text": "what is on today?"})
	got := until(t, laptop, func(f client.Frame) bool { return f.Type == "agent.idle" && f.ChatID == phoneLane })
	notes := 0
	var stop client.Frame
	for _, f := range got {
		switch {
		case f.Type == "message.stop":
			stop = f
		case f.Type == "message" && testgw.Str(t, f, "role") == "system":
			if !strings.Contains(testgw.Str(t, f, "text"), "could not be spoken: the text-to-speech server answered 500") {
				t.Fatalf("the lane was told %s", f.Raw)
			}
			notes++
		}
	}
	if notes != 1 || testgw.Str(t, stop, "final_text") != text || len(mediaOf(t, stop)) != 1 {
		t.Fatalf("%d notes; the reply: %s", notes, stop.Raw)
	}
	if n := len(tts.Requests()); n != 2 {
		t.Fatalf("%d speech requests, want 2", n)
	}
	frames := p.until(func(f mf) bool { return f.T() == "message" && strings.Contains(f.S("text"), "could not be spoken") })
	if n := len(voiceFiles(t, frames)); n != 1 {
		t.Fatalf("the phone got %d voice pieces", n)
	}
	p.expect("avatar", func(f mf) bool { return f.S("state") == "idle" })
}
