package server_test

import (
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

// withTTS speaks through a fake OpenAI-compatible /v1/audio/speech.
func withTTS(t *testing.T, fake http.Handler) func(*server.AppConfig) {
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	s, err := voice.NewTTS(voice.TTSConfig{URL: srv.URL + "/v1", Model: "tts-1", Voice: "alloy", Format: "wav"})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *server.AppConfig) { c.TTS = s }
}

// turnStop sends text in the default chat and returns the reply's
// message.stop.
func turnStop(t *testing.T, d *testgw.Device, text string) client.Frame {
	t.Helper()
	if _, err := sendWith(t, d, client.Lane{ChatID: "default"}, text); err != nil {
		t.Fatal(err)
	}
	return d.Expect("message.stop", func(f client.Frame) bool { return f.ChatID == "default" })
}

// TestVoiceOut: with /voice on the echo agent's reply comes with its
// speech as audio media of the final message, which pulls back as the WAV
// the TTS server made of its text; /voice off, none.
func TestVoiceOut(t *testing.T) {
	fake := &fakespeech.TTS{}
	g := testgw.Start(t, withTTS(t, fake))
	laptop := g.Dial(t, "laptop")

	if _, err := sendWith(t, laptop, client.Lane{ChatID: "default"}, "/voice"); err != nil {
		t.Fatal(err)
	}
	laneSays(t, laptop, "default", "Voice replies are off")
	if _, err := sendWith(t, laptop, client.Lane{ChatID: "default"}, "/voice on"); err != nil {
		t.Fatal(err)
	}
	laneSays(t, laptop, "default", "Voice replies on")

	stop := turnStop(t, laptop, "hello there")
	reply := testgw.Str(t, stop, "final_text")
	ms := mediaOf(t, stop)
	if len(ms) != 1 || ms[0].Mime != "audio/wav" || ms[0].Kind != "audio" {
		t.Fatalf("the final message: %s", stop.Raw)
	}
	_, b, err := pull(t, laptop, ms[0].MediaID)
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := fakespeech.ParseWAV(b); err != nil || n != 10*len([]rune(reply)) {
		t.Fatalf("the speech pulled: %d samples, %v (reply %q)", n, err, reply)
	}
	if r := fake.Requests(); len(r) != 1 || r[0].Input != reply || r[0].Voice != "alloy" || r[0].Format != "wav" {
		t.Fatalf("the TTS server got %+v", r)
	}

	if _, err := sendWith(t, laptop, client.Lane{ChatID: "default"}, "/voice off"); err != nil {
		t.Fatal(err)
	}
	laneSays(t, laptop, "default", "Voice replies off")
	if stop := turnStop(t, laptop, "quiet now"); len(mediaOf(t, stop)) != 0 {
		t.Fatalf("spoken with /voice off: %s", stop.Raw)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("%d speech requests", n)
	}
}

// TestVoiceOutTTSDown: a TTS server that cannot be reached costs only the
// audio: the reply's text is whole, and the lane is told why.
func TestVoiceOutTTSDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	s, err := voice.NewTTS(voice.TTSConfig{URL: url + "/v1", Format: "wav"})
	if err != nil {
		t.Fatal(err)
	}
	g := testgw.Start(t, func(c *server.AppConfig) { c.TTS = s })
	laptop := g.Dial(t, "laptop")
	if _, err := sendWith(t, laptop, client.Lane{ChatID: "default"}, "/voice on"); err != nil {
		t.Fatal(err)
	}
	laneSays(t, laptop, "default", "Voice replies on")
	stop := turnStop(t, laptop, "hello there")
	if !strings.Contains(testgw.Str(t, stop, "final_text"), "hello there") || len(mediaOf(t, stop)) != 0 {
		t.Fatalf("the final message: %s", stop.Raw)
	}
	laneSays(t, laptop, "default", "could not be spoken: the text-to-speech server cannot be reached")
}
