package mobile

import (
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
// from when the last has gone follows the usual rule: idle (or thinking,
// the agent still at work) after AvatarQuiet without output. A stopped or
// failed speech ends the hold the same way (its core.EvSpeech off). When
// the audio finishes playing is the phone's to know: the protocol's ack
// ("displayed/played") is one the server ignores.

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
func (c *codec) voiceFile(_ core.Media, done bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.conn == nil {
		return
	}
	if done {
		c.voices--
		c.unhold()
		return
	}
	for _, o := range c.setAvatar(nil, mobilev1.AvatarSpeaking) {
		c.conn.Send(o)
	}
}
