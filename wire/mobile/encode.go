package mobile

import (
	"sync"
	"time"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/mobilev1"
)

// codec turns the core's events into the frames of one Hermes Mobile
// connection. Unlike Iris's it has state: the replies streaming in the
// device's lane (sent as edits of one message, at a bounded rate) and the
// avatar. Only events of the device's lane reach the device.
type codec struct {
	d        *Dialect
	deviceID string // the hub's device id
	lane     core.Lane
	session  string

	files *outFiles // sends the agent's files, off the fan-out path

	mu      sync.Mutex
	conn    *hub.Conn // set once Connect returns; timers need it
	closed  bool
	streams map[string]*stream
	avatar  string // "" until the first avatar frame: the app starts idle
	busy    bool
	quiet   *time.Timer // avatar back to idle (or thinking) after quiet
	// The avatar speaks while a reply's speech goes on (core.EvSpeech)
	// and while voice files are queued or going out to the phone: the
	// quiet timer does not bring it down meanwhile (avatar.go).
	speech  bool
	voices  int
	playEnd time.Time // when the voice written so far has played, as far as its lengths are known
}

// stream is a reply streaming in the lane.
type stream struct {
	text  string // newest text
	sent  string // text of the last frames sent
	began bool   // its first frames went out
	last  time.Time
	timer *time.Timer // a pending edit
}

func newCodec(d *Dialect, deviceID string, lane core.Lane, session string) *codec {
	c := &codec{d: d, deviceID: deviceID, lane: lane, session: session, streams: map[string]*stream{}, files: newOutFiles(d)}
	c.files.voice = c.voiceFile
	return c
}

// setConn gives the codec its connection, which its timers and its file
// sender write to.
func (c *codec) setConn(conn *hub.Conn) {
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
	c.files.start(conn)
}

// close stops the codec's timers and its file sender; nothing is sent
// after it.
func (c *codec) close() {
	c.files.stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, st := range c.streams {
		if st.timer != nil {
			st.timer.Stop()
		}
	}
	if c.quiet != nil {
		c.quiet.Stop()
	}
}

// Frames implements hub.Codec.
func (c *codec) Frames(ev *core.Event, _ int64) []hub.Out {
	if ev.Lane != c.lane {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	var outs []hub.Out
	switch ev.Type {
	case core.EvMessage:
		m := ev.Message
		if m == nil || m.Role == core.RoleUser {
			// The protocol has no frame for a person's words: the phone
			// shows the agent's side of its lane.
			return nil
		}
		if m.Text != "" {
			outs = messageFrames(m.ID, m.Text, false, true)
		}
		c.sendFiles(m.Media)
		if m.Role == core.RoleAssistant && (m.Text != "" || len(m.Media) > 0) {
			outs = c.output(outs)
		}
	case core.EvMessageStart:
		if c.streams[ev.StreamID] == nil {
			c.streams[ev.StreamID] = &stream{}
		}
		outs = c.output(nil)
	case core.EvMessageUpdate:
		st := c.streams[ev.StreamID]
		if st == nil { // joined mid-stream without its start
			st = &stream{}
			c.streams[ev.StreamID] = st
		}
		st.text = ev.Text
		outs = c.output(c.update(ev.StreamID, st))
	case core.EvMessageStop:
		m := ev.Message
		if m == nil {
			return nil
		}
		st := c.streams[m.ID]
		delete(c.streams, m.ID)
		began := false
		if st != nil {
			began = st.began
			if st.timer != nil {
				st.timer.Stop()
			}
		}
		// Files offered while the reply streamed are sent already; the
		// list catches those whose offer came before this connection.
		c.sendFiles(m.Media)
		if m.Text == "" && !began {
			return nil
		}
		outs = c.output(messageFrames(m.ID, m.Text, began, true))
	case core.EvMessageDeleted:
		// The protocol cannot take back what the phone was shown; the
		// stream's state goes (a reply cut off before it was stored ends
		// this way, with no message.stop).
		for _, id := range ev.MessageIDs {
			if st := c.streams[id]; st != nil {
				if st.timer != nil {
					st.timer.Stop()
				}
				delete(c.streams, id)
			}
		}
	case core.EvTyping:
		if ev.On {
			outs = []hub.Out{{Data: mobilev1.Marshal(mobilev1.Typing{T: "typing"})}}
		}
	case core.EvAgentBusy:
		c.busy = true
		if c.quiet != nil {
			c.quiet.Stop()
		}
		outs = c.setAvatar(nil, mobilev1.AvatarThinking)
	case core.EvAgentIdle:
		c.busy = false
		outs = []hub.Out{{Data: mobilev1.Marshal(mobilev1.Typing{T: "typing", Stop: true})}}
		if c.avatar == mobilev1.AvatarThinking || c.quiet == nil {
			c.armQuiet()
		}
	case core.EvMediaOffer:
		if ev.Media != nil {
			c.sendFiles([]core.Media{*ev.Media})
			if !isVoice(*ev.Media) {
				// A voice file's speaking goes out on the sender's path,
				// right before its frames (voiceFile).
				outs = c.output(nil)
			}
		}
	case core.EvSpeech:
		c.speech = ev.On
		c.unhold()
	case core.EvPicker:
		if ev.Picker != nil {
			if data := c.d.cards.open(c.deviceID, c.session, ev.Picker); data != nil {
				outs = []hub.Out{{Data: data}}
			}
		}
	case core.EvPickerClosed:
		// Answered on another device (or the phone itself), timed out or
		// given up by a stopped turn: the card closes now, not at its own
		// timeout. Only the card's own device has it to close.
		// A connection replaced by a newer one of the device may not
		// have ended yet: it must not take the card the newer one shows.
		if cl := ev.Closed; cl != nil && (c.conn == nil || c.conn.Err() == nil) {
			if cd := c.d.cards.take(cl.ID, c.deviceID); cd != nil {
				outs = []hub.Out{{Data: cd.doneFrame(cl.Value)}}
			}
		}
	}
	return outs
}

// sendFiles hands files to the connection's sender.
func (c *codec) sendFiles(ms []core.Media) {
	for _, m := range ms {
		if c.files.add(m) && isVoice(m) {
			c.voices++
		}
	}
}

// output notes that the agent produced output: the avatar speaks, and
// returns to rest after a quiet spell.
func (c *codec) output(outs []hub.Out) []hub.Out {
	outs = c.setAvatar(outs, mobilev1.AvatarSpeaking)
	c.armQuiet()
	return outs
}

func (c *codec) armQuiet() {
	if c.quiet != nil {
		c.quiet.Stop()
	}
	c.quiet = time.AfterFunc(c.d.cfg.AvatarQuiet, c.quietDone)
}

func (c *codec) quietDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.conn == nil || c.holding() {
		return
	}
	if rest := time.Until(c.playEnd); rest > 0 {
		c.quiet = time.AfterFunc(rest, c.quietDone) // the phone still plays the reply
		return
	}
	state := mobilev1.AvatarIdle
	if c.busy {
		state = mobilev1.AvatarThinking // output paused, the agent still works
	}
	for _, o := range c.setAvatar(nil, state) {
		c.conn.Send(o)
	}
}

// setAvatar appends an avatar frame when the state changes.
func (c *codec) setAvatar(outs []hub.Out, state string) []hub.Out {
	cur := c.avatar
	if cur == "" {
		cur = mobilev1.AvatarIdle
	}
	if cur == state {
		return outs
	}
	c.avatar = state
	return append(outs, hub.Out{Data: mobilev1.Marshal(mobilev1.Avatar{T: "avatar", State: state})})
}

// update returns the frames a stream's new text calls for now: its first
// frames at once, then edits at most every EditEvery per chunk of text
// (an edit resends the whole text), the newest text last; an edit held
// back is sent by a timer.
func (c *codec) update(id string, st *stream) []hub.Out {
	if st.text == "" || st.text == st.sent {
		return nil
	}
	now := time.Now()
	if !st.began {
		st.began, st.sent, st.last = true, st.text, now
		return messageFrames(id, st.text, false, false)
	}
	wait := c.editInterval(st.text) - now.Sub(st.last)
	if wait <= 0 {
		st.sent, st.last = st.text, now
		return messageFrames(id, st.text, true, false)
	}
	if st.timer == nil {
		st.timer = time.AfterFunc(wait, func() { c.flush(id) })
	}
	return nil
}

func (c *codec) editInterval(text string) time.Duration {
	n := (utf8.RuneCountInString(text) + mobilev1.ChunkChars - 1) / mobilev1.ChunkChars
	return c.d.cfg.EditEvery * time.Duration(max(n, 1))
}

// flush sends a stream's held-back edit.
func (c *codec) flush(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[id]
	if c.closed || st == nil || c.conn == nil {
		return
	}
	st.timer = nil
	if st.text == st.sent {
		return
	}
	st.sent, st.last = st.text, time.Now()
	for _, o := range messageFrames(id, st.text, true, false) {
		if !c.conn.Send(o) {
			return
		}
	}
}

// messageFrames cuts text into message frames of at most mobilev1.ChunkChars
// characters with one id; final marks the last. Edits in flight carry a
// queue key, so under backpressure only the newest edit of each chunk
// waits to be written.
func messageFrames(id, text string, edit, final bool) []hub.Out {
	parts := mobilev1.SplitChars(text, mobilev1.ChunkChars)
	outs := make([]hub.Out, len(parts))
	for i, p := range parts {
		last := i == len(parts)-1
		outs[i] = hub.Out{Data: mobilev1.Marshal(mobilev1.Message{T: "message", ID: id, Text: p, Chunk: mobilev1.Chunk{Index: i, Total: len(parts)}, Final: final && last, Edit: edit})}
		if edit && !final {
			outs[i].Key = "m\x00" + id + "\x00" + itoa(i)
		}
	}
	return outs
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	p := len(b)
	for i > 0 {
		p--
		b[p] = byte('0' + i%10)
		i /= 10
	}
	return string(b[p:])
}
