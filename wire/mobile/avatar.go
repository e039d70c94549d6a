package mobile

import (
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/proto/mobilev1"
)

// The avatar while a reply is spoken. The protocol's avatar shows
// speaking "while the agent is producing a response/media", and the
// phone plays a voice message as it arrives: so the avatar speaks from
// the moment the first voice piece goes out (its avatar frame written
// right before the piece's first media frame), stays speaking while the
// reply's speech goes on or pieces wait to be written to the phone (a
// slow TTS or a slow phone must not bring it down between pieces), and
// from when the last has gone follows the usual rule, once the audio
// written has played: idle (or thinking, the agent still at work) after
// AvatarQuiet without output and not before the end of the audio (each
// piece's length read from its headers as it is sent, voice.Duration; a
// piece of unknown length counts for nothing). A stopped or failed speech ends the
// hold the same way (its core.EvSpeech off). The protocol's ack
// ("displayed/played") would say when the phone is done, but the server
// ignores it, so the lengths stand in.

// holding reports whether speech keeps the avatar speaking; c.mu is held.
func (c *codec) holding() bool { return c.speech || c.voices > 0 }

// unhold lets the avatar rest once nothing holds it; c.mu is held.
func (c *codec) unhold() {
	if !c.holding() && c.avatar == mobilev1.AvatarSpeaking {
		c.armQuiet()
	}
}

// voiceFile is the file sender's report on a voice file: about to go
// (the avatar speaks first), or gone.
func (c *codec) voiceFile(_ core.Media, done bool, plays time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.conn == nil {
		return
	}
	if done {
		// The phone plays the piece once it has it, after those before.
		if now := time.Now(); c.playEnd.Before(now) {
			c.playEnd = now
		}
		c.playEnd = c.playEnd.Add(plays)
		c.voices--
		c.unhold()
		return
	}
	for _, o := range c.setAvatar(nil, mobilev1.AvatarSpeaking) {
		c.conn.Send(o)
	}
}
