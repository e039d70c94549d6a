package server_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakespeech"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/voice"
)

// withSTT transcribes through a fake OpenAI-compatible server.
func withSTT(t *testing.T, fake http.Handler) func(*server.AppConfig) {
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	s, err := voice.NewSTT(voice.STTConfig{URL: srv.URL + "/v1", Model: "whisper-1", Key: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *server.AppConfig) { c.STT = s }
}

// userMessage waits for the laptop's copy of a person's message in lane.
func userMessage(t *testing.T, d *testgw.Device, chatID string) client.Frame {
	t.Helper()
	return d.Expect("message", func(f client.Frame) bool {
		return f.ChatID == chatID && testgw.Str(t, f, "role") == "user"
	})
}

func laneSays(t *testing.T, d *testgw.Device, chatID, substr string) {
	t.Helper()
	d.Expect("message", func(f client.Frame) bool {
		return f.ChatID == chatID && testgw.Str(t, f, "role") == "system" && strings.Contains(testgw.Str(t, f, "text"), substr)
	})
}

// TestVoiceInTranscribed: a wav recording from Hermes Mobile and an Iris
// upload of kind audio become messages whose text is the transcript (on
// the Iris device too) and which keep the recording; the agent gets the
// words and the file. A recording the app transcribed itself is not sent
// to the server.
func TestVoiceInTranscribed(t *testing.T) {
	fake := &fakespeech.STT{Key: "sk-test", Transcript: func(tr fakespeech.Transcription) string {
		if _, n, err := fakespeech.ParseWAV(tr.File); err == nil {
			return map[int]string{1600: "turn on the lights", 800: "what time is it"}[n]
		}
		return "?"
	}}
	g, ag := keeperGW(t, withSTT(t, fake))
	laptop := g.Dial(t, "laptop")
	p := connectPhone(t, g, "tel-1")
	lane := "mobile:tel-1"

	wav := fakespeech.WAV(16000, 1600)
	p.send(map[string]any{"t": "audio", "id": "a1", "format": "wav", "data": b64s(base64.StdEncoding.EncodeToString(wav))})
	msg := userMessage(t, laptop, lane)
	ms := mediaOf(t, msg)
	if testgw.Str(t, msg, "text") != "turn on the lights" || len(ms) != 1 || ms[0].Kind != "voice" || ms[0].Mime != "audio/wav" {
		t.Fatalf("the laptop saw %s", msg.Raw)
	}
	if _, b, err := pull(t, laptop, ms[0].MediaID); err != nil || !bytes.Equal(b, wav) {
		t.Fatalf("the recording pulled: %d bytes, %v", len(b), err)
	}
	turn := lastTurn(t, ag, 1)
	if turn.Input != "turn on the lights" || len(turn.Media) != 1 {
		t.Fatalf("the agent got %q with %d files", turn.Input, len(turn.Media))
	}
	p.finalText("noted: turn on the lights")
	if r := fake.Requests(); len(r) != 1 || r[0].Model != "whisper-1" || r[0].Filename != "voice.wav" || r[0].ContentType != "audio/wav" || !bytes.Equal(r[0].File, wav) {
		t.Fatalf("the STT server got %+v", r)
	}

	// The app's own transcript stands: nothing is sent for it.
	p.send(map[string]any{"t": "audio", "id": "a2", "format": "wav", "text": "my own words", "data": b64s(base64.StdEncoding.EncodeToString(wav))})
	if turn := lastTurn(t, ag, 2); turn.Input != "my own words" {
		t.Fatalf("the agent got %q", turn.Input)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("%d transcriptions", n)
	}

	// An Iris upload of kind audio, sent without text.
	short := fakespeech.WAV(16000, 800)
	upload(t, laptop, "rec1", short, 4096, "kind", "audio", "mime", "audio/wav", "filename", "memo.wav")
	echo, err := sendWith(t, laptop, client.Lane{ChatID: "default"}, "", "rec1")
	if err != nil {
		t.Fatal(err)
	}
	if testgw.Str(t, echo, "text") != "what time is it" || len(mediaOf(t, echo)) != 1 {
		t.Fatalf("the echo: %s", echo.Raw)
	}
	if turn := lastTurn(t, ag, 3); turn.Input != "what time is it" || len(turn.Media) != 1 || turn.Media[0].Filename != "memo.wav" {
		t.Fatalf("the agent got %q, %+v", turn.Input, turn.Media)
	}
}

// TestVoiceInWithoutSTT: with no endpoint the recording reaches the agent
// as a file, as before, and each lane is told once why.
func TestVoiceInWithoutSTT(t *testing.T) {
	g, ag := keeperGW(t)
	laptop := g.Dial(t, "laptop")
	p := connectPhone(t, g, "tel-1")
	for i, id := range []string{"a1", "a2"} {
		p.send(map[string]any{"t": "audio", "id": id, "format": "wav", "data": b64s(base64.StdEncoding.EncodeToString(fakespeech.WAV(8000, 100)))})
		if turn := lastTurn(t, ag, i+1); turn.Input != "" || len(turn.Media) != 1 {
			t.Fatalf("the agent got %q with %d files", turn.Input, len(turn.Media))
		}
	}
	// Both turns have ended by the second agent.idle: the notes about
	// them, if any, came before.
	idles, notes := 0, 0
	until(t, laptop, func(f client.Frame) bool {
		if f.ChatID != "mobile:tel-1" {
			return false
		}
		if f.Type == "message" && testgw.Str(t, f, "role") == "system" && strings.Contains(testgw.Str(t, f, "text"), "--stt-url") {
			notes++
		}
		if f.Type == "agent.idle" {
			idles++
		}
		return idles == 2
	})
	if notes != 1 {
		t.Fatalf("the lane was told %d times there is no transcription", notes)
	}
}

// TestVoiceInSTTFails: a failing server costs nothing but the transcript:
// the message keeps its recording, the agent gets the file, and the lane
// is told what the server said.
func TestVoiceInSTTFails(t *testing.T) {
	g, ag := keeperGW(t, withSTT(t, &fakespeech.STT{Key: "another key"}))
	laptop := g.Dial(t, "laptop")
	p := connectPhone(t, g, "tel-1")
	p.send(map[string]any{"t": "audio", "id": "a1", "format": "wav", "data": b64s(base64.StdEncoding.EncodeToString(fakespeech.WAV(8000, 100)))})
	msg := userMessage(t, laptop, "mobile:tel-1")
	if testgw.Str(t, msg, "text") != "" || len(mediaOf(t, msg)) != 1 {
		t.Fatalf("the laptop saw %s", msg.Raw)
	}
	laneSays(t, laptop, "mobile:tel-1", "Incorrect API key provided.")
	if turn := lastTurn(t, ag, 1); turn.Input != "" || len(turn.Media) != 1 {
		t.Fatalf("the agent got %q with %d files", turn.Input, len(turn.Media))
	}
}
