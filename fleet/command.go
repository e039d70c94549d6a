package fleet

import (
	"errors"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
)

// A device's picker answer or stop reaches a replica that may not run the
// lane's turn: the turn's pickers live in the memory of the replica that
// holds the lane's lease. That replica hands the command to the fleet, and
// the replica that has the picker (or runs the lane) applies it; the
// others ignore it. A peer's command is applied only through the checks a
// device's own goes through (the picker must be open here and the value
// one of its choices; a stop is read from the lease row), so a hostile
// publisher can do no more than a device could.

// Commands.
const (
	opPick    = "pick"
	opStop    = "stop"
	opStarted = "started" // the sender's replica sends the read.receipt
)

// Bounds of a command's fields: a picker's free answer is a message's
// text at most (gateway.MaxTextBytes), ids are short.
const (
	maxValue = 64 << 10
	maxID    = 256
)

// Command is a peer's command, for Config.Command.
type Command struct {
	// Stop: a device stopped Lane's running turn. Otherwise a device
	// answered picker Picker with Value.
	Stop   bool
	Lane   core.Lane
	Picker string
	Value  string
	// Device answered (the reply names it); "" when unknown.
	Device string
	// Started: the replica running Lane began the turn of message
	// MessageID; the replica it was sent through sends the receipt.
	Started   bool
	MessageID string
}

func (c *command) check() error {
	if c == nil {
		return errors.New("fleet: command message without its command")
	}
	// A stop names its lane; an answer may not know its picker's.
	hasLane := c.Chat != "" || c.Thread != ""
	if (hasLane || c.Op == opStop || c.Op == opStarted) && (!validID(c.Chat) || (c.Thread != "" && !validID(c.Thread))) {
		return errors.New("fleet: bad lane in a command")
	}
	switch c.Op {
	case opPick:
		if c.Msg != "" || !validID(c.Picker) || len(c.Value) > maxValue || !utf8.ValidString(c.Value) ||
			(c.Device != "" && !validDevice(c.Device)) {
			return errors.New("fleet: bad picker answer")
		}
	case opStop:
		if c.Picker != "" || c.Value != "" || c.Device != "" || c.Msg != "" {
			return errors.New("fleet: a stop with a picker's fields")
		}
	case opStarted:
		if !validID(c.Msg) || c.Picker != "" || c.Value != "" || c.Device != "" {
			return errors.New("fleet: bad turn start")
		}
	default:
		return errors.New("fleet: unknown command")
	}
	return nil
}

func validID(s string) bool { return s != "" && len(s) <= maxID && utf8.ValidString(s) }

// ForwardPick hands a device's answer to picker pickerID (of lane lk, when
// known) to the replicas: the one that has the picker applies it. It never
// blocks; lost on the way, the picker times out as it would unanswered.
func (f *Fleet) ForwardPick(lk core.Lane, deviceID, pickerID, value string) {
	if !validDevice(deviceID) {
		deviceID = ""
	}
	f.sendCommand(&command{Op: opPick, Chat: lk.ChatID, Thread: lk.ThreadID, Picker: pickerID, Value: value, Device: deviceID})
}

// ForwardStop tells the replicas that a device stopped lk's turn, which
// another replica runs: its holder reads the stop from the lease row at
// once rather than at its next renewal (the row stays the authority, and
// the path when NATS is down).
func (f *Fleet) ForwardStop(lk core.Lane) {
	f.sendCommand(&command{Op: opStop, Chat: lk.ChatID, Thread: lk.ThreadID})
}

// ForwardStarted tells the replicas that this one began the turn of
// messageID in lk: the replica it was sent through sends its sender the
// read.receipt. Lost on the way, the receipt is not sent (the reply
// still comes).
func (f *Fleet) ForwardStarted(lk core.Lane, messageID string) {
	f.sendCommand(&command{Op: opStarted, Chat: lk.ChatID, Thread: lk.ThreadID, Msg: messageID})
}

func (f *Fleet) sendCommand(c *command) {
	if err := c.check(); err != nil {
		f.met.dropped.WithLabelValues("bad_command").Inc()
		return
	}
	f.send(&message{Kind: kindCommand, Cmd: c})
}

// command applies a peer's command (on NATS's goroutine: Config.Command
// must not wait long).
func (f *Fleet) command(c *command) {
	if f.cfg.Command == nil {
		return
	}
	f.cfg.Command(Command{Stop: c.Op == opStop, Started: c.Op == opStarted, Lane: core.Lane{ChatID: c.Chat, ThreadID: c.Thread},
		Picker: c.Picker, Value: c.Value, Device: c.Device, MessageID: c.Msg})
}
