package mobile

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/mobilev1"
	"github.com/irisgate/irisgate/store"
)

// TestAvatarSpeaksWhileTheReplyIsSpoken: the quiet spell that brings the
// avatar down (its timer's quietDone, called here directly, the timers
// set an hour away) does not while the reply's speech goes on or a voice
// piece waits to go; once both are over it does. The speaking frame of a
// voice piece goes out on the file sender's path, before its frames.
func TestAvatarSpeaksWhileTheReplyIsSpoken(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := hub.New(st, slog.Default(), hub.DefaultLimits)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := h.Add(ctx, "mobile:tel-1", noFrames{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Remove(conn)
	lane := core.Lane{ChatID: "mobile:tel-1"}
	d := &Dialect{cfg: Config{Log: slog.Default(), Settings: Settings{AvatarQuiet: time.Hour, EditEvery: time.Hour}}}
	c := newCodec(d, "mobile:tel-1", lane, "mobile:tel-1")
	c.conn = conn // the sender is not started: the test plays its part
	defer c.close()

	// avatars returns the avatar states in outs (what Frames returned,
	// the hub's to write) and then those queued on the connection since
	// the last call.
	var buf []hub.Out
	avatars := func(outs []hub.Out) []string {
		if buf, err = conn.Next(buf[:0]); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range append(outs, buf...) {
			var f struct{ T, State string }
			json.Unmarshal(o.Data, &f)
			if f.T == "avatar" {
				got = append(got, f.State)
			}
		}
		return got
	}
	piece := core.Media{ID: "md_1", Kind: "audio", Mime: "audio/wav", Filename: "reply-1.wav", MessageID: "m_1"}

	if got := avatars(c.Frames(&core.Event{Type: core.EvAgentBusy, Lane: lane}, 0)); len(got) != 1 || got[0] != mobilev1.AvatarThinking {
		t.Fatalf("avatar %v at agent.busy", got)
	}
	// The offer of a voice piece speaks on the sender's path, not here.
	if got := avatars(c.Frames(&core.Event{Type: core.EvMediaOffer, Lane: lane, Media: &piece}, 0)); len(got) != 0 {
		t.Fatalf("avatar %v at the offer", got)
	}
	c.voiceFile(piece, false, 0)
	if got := avatars(nil); len(got) != 1 || got[0] != mobilev1.AvatarSpeaking {
		t.Fatalf("avatar %v as the piece goes", got)
	}
	c.Frames(&core.Event{Type: core.EvSpeech, Lane: lane, StreamID: "m_1", On: true}, 0)
	c.quietDone()
	c.voiceFile(piece, true, 0) // gone; the speech goes on
	c.quietDone()
	if got := avatars(nil); len(got) != 0 {
		t.Fatalf("the avatar went %v while the reply is spoken", got)
	}
	second := piece
	second.ID = "md_2"
	c.Frames(&core.Event{Type: core.EvMediaOffer, Lane: lane, Media: &second}, 0)
	c.Frames(&core.Event{Type: core.EvSpeech, Lane: lane, StreamID: "m_1"}, 0)
	c.quietDone() // the speech is over, its last piece not yet gone
	if got := avatars(nil); len(got) != 0 {
		t.Fatalf("the avatar went %v before the last piece went", got)
	}
	c.voiceFile(second, false, 0)
	c.voiceFile(second, true, 0)
	c.quietDone()
	if got := avatars(nil); len(got) != 1 || got[0] != mobilev1.AvatarThinking {
		t.Fatalf("avatar %v after the last piece (the agent still busy)", got)
	}

	// A piece that plays for an hour keeps the avatar speaking past the
	// quiet spell: the rest waits for the end of the audio.
	long := piece
	long.ID = "md_3"
	c.Frames(&core.Event{Type: core.EvMediaOffer, Lane: lane, Media: &long}, 0)
	c.voiceFile(long, false, 0)
	c.voiceFile(long, true, time.Hour)
	c.quietDone()
	if got := avatars(nil); len(got) != 1 || got[0] != mobilev1.AvatarSpeaking {
		t.Fatalf("avatar %v while an hour of audio plays", got)
	}
	c.mu.Lock()
	rest := time.Until(c.playEnd)
	c.mu.Unlock()
	if rest < 59*time.Minute {
		t.Fatalf("the audio ends in %v", rest)
	}
}
