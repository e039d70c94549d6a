package server_test

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/fakespeech"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/voice"
)

// BenchmarkVoiceFirstPiece measures how soon a Hermes Mobile phone gets
// a reply's first voice piece: from the moment the fake model begins
// writing the first text chunk to the phone's read of the first piece's
// last media frame (first_voice_ms), against the read of the reply's
// final text (reply_end_ms), and from the chunk that completes the first
// sentence (sentence_to_voice_ms: the gateway's own share, the splitter,
// the TTS request, storing, offering and sending the piece). The model
// streams 12 sentences in 48 chunks, one every 10 ms (real SSE over
// loopback into the real model backend); the fake TTS answers at once, so
// the figures are the gateway's pipeline, not a speech model's. Before pieces were spoken as the reply
// streamed, the first voice came after the reply's end (ratio > 1).
//
//	go test ./server/ -run '^$' -bench VoiceFirstPiece -benchtime 20x
func BenchmarkVoiceFirstPiece(b *testing.B) {
	model := fakeopenai.NewServer()
	defer model.Close()
	m, err := agent.NewModel(agent.ModelConfig{
		Providers: []agent.Provider{{ID: "fake", BaseURL: model.URL, APIKey: "bench", Models: []agent.ModelInfo{{ID: "bench-model", ContextLength: 1 << 20}}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	fake := &fakespeech.TTS{}
	speech := httptest.NewServer(fake)
	defer speech.Close()
	tts, err := voice.NewTTS(voice.TTSConfig{URL: speech.URL + "/v1", Format: "wav"})
	if err != nil {
		b.Fatal(err)
	}
	g := testgw.Start(b, func(c *server.AppConfig) { c.Agent, c.TTS = m, tts })
	p := connectPhone(b, g, "tel-1")
	p.send(map[string]any{"t": "text", "id": seq("v"), "text": "/voice on"})
	p.expect("message", func(f mf) bool { return strings.Contains(f.S("text"), "Voice replies on") })

	reply := strings.TrimSpace(strings.Repeat(said1+" "+said2+" "+said3+". ", 4))
	// The SSE chunk that completes the first sentence (with the space
	// after it, which is when it can be cut): fakeopenai.Text cuts the
	// reply into 48 runs of equal length, chunk i (from 1) the i-th.
	const chunks = 48
	space, runes := len([]rune(said1)), len([]rune(reply))
	sentenceChunk := 1
	for sentenceChunk*runes/chunks <= space {
		sentenceChunk++
	}
	var firstVoice, replyEnd, afterSentence time.Duration
	b.ResetTimer()
	for range b.N {
		var first, sentence atomic.Int64
		model.Push(fakeopenai.Script{Chunks: fakeopenai.Text(reply, chunks), Gap: 10 * time.Millisecond, Sending: func(i int) {
			if i == 1 { // chunk 0 only names the role
				first.Store(time.Now().UnixNano())
			}
			if i == sentenceChunk {
				sentence.Store(time.Now().UnixNano())
			}
		}})
		asked := len(fake.Requests())
		p.send(map[string]any{"t": "text", "id": seq("m"), "text": "turn"})
		var voiceAt, endAt time.Time
		pieces, idle := 0, false
		// Every frame of the turn is read before the next one: its last
		// voice pieces may come after its typing stop.
		for !idle || endAt.IsZero() || pieces < len(fake.Requests())-asked {
			f := p.next()
			switch {
			case f.T() == "media" && f.B("final"):
				pieces++
				if voiceAt.IsZero() {
					voiceAt = time.Now()
				}
			case f.T() == "message" && f.B("final") && f.S("text") != "":
				endAt = time.Now()
			case f.T() == "typing" && f.B("stop"):
				idle = true
			}
		}
		t0 := time.Unix(0, first.Load())
		firstVoice += voiceAt.Sub(t0)
		afterSentence += voiceAt.Sub(time.Unix(0, sentence.Load()))
		replyEnd += endAt.Sub(t0)
	}
	b.StopTimer()
	n := time.Duration(b.N)
	b.ReportMetric(float64((firstVoice/n).Microseconds())/1000, "first_voice_ms")
	b.ReportMetric(float64((replyEnd/n).Microseconds())/1000, "reply_end_ms")
	b.ReportMetric(float64((afterSentence/n).Microseconds())/1000, "sentence_to_voice_ms")
	b.ReportMetric(float64(firstVoice)/float64(replyEnd), "voice/end")
}
