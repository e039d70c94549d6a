package fleet

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"sync"
	"time"
)

// Every message is signed with the fleet's key, which only the replicas
// have (it is in the database they share: postgres.Store.FleetKey): a NATS
// peer without it can neither forge a message nor alter one on the way.
// On the wire (WireVersion 2) a message is
//
//	body || ts || tag
//
// body the JSON message (wire.go); ts the sender's clock when it sent it,
// Unix milliseconds, 8 bytes big-endian; tag HMAC-SHA256(key, subject ||
// 0 || body || ts), 32 bytes. The subject is signed so that a message is
// only good on the subject it was sent on. A receiver checks the size,
// then the tag (in constant time), then the time, and only then decodes
// the JSON: a stranger's bytes never reach the decoder.
//
// The time bounds replay: a message captured on the wire is refused once
// it is older than MaxSkew (or dated further ahead). Within the window a
// captured message can be sent again, and what that can do was checked
// kind by kind:
//   - c: a cursor is read from the store up to the store's head
//     (beyond_head), and one already delivered is ignored (order.go,
//     noteLocked): nothing a device sees changes;
//   - t: a transient frame is shown again: a repeated typing,
//     message.update, tool frame of a turn the owner's own agent ran, or a
//     picker.closed for a picker already closed (the gateway's list of
//     pickers open elsewhere deletes it again: picker ids are never
//     reused). No new content, nothing stored;
//   - p, q, b: presence as it was up to two minutes ago, replaced by the
//     origin's next summary (every 5 s): for those seconds a push may be
//     held back from, or sent to, a device that moved; a query makes
//     summaries, at most one a second;
//   - x pick: a picker's answer is taken once (turn.Runner.selectPicker:
//     the first answer closes it), so a repeated answer is ignored: it can
//     only give the answer the device gave;
//   - x stop: the stop is the lease row's counter, raised by the device's
//     own request in the database; the message only makes the holder read
//     the row now, so a repeated one is one more read of it.
//
// Nothing here hides what messages say: transient frames (what a turn
// streams) are readable by whoever can read the NATS subjects. That is
// for NATS's credentials and TLS (docs/replicas.md).

// KeySize is the length of the fleet's key (Config.Key), at least.
const KeySize = 32

// MaxSkew is how far a message's time may be from the receiver's clock
// either way: the replicas' clocks must agree within it (NTP does), and a
// captured message is refused once it is older.
const MaxSkew = 2 * time.Minute

const (
	tagSize = sha256.Size
	tsSize  = 8
	// trailer is what signing adds to a body.
	trailer = tsSize + tagSize
)

var (
	errBadTag = errors.New("fleet: message not signed with this fleet's key (another key, altered on the way, or not from a replica)")
	errStale  = errors.New("fleet: message dated outside the window of MaxSkew (replicas' clocks apart, or a replay)")
)

// sealer signs and checks messages with the fleet's key.
type sealer struct {
	pool sync.Pool // of hash.Hash: HMAC-SHA256 with the key, reset after use
	// subj holds the subjects' bytes, so that signing one allocates
	// nothing for it; read-only once made.
	subj map[string][]byte
}

func newSealer(key []byte, subjects ...string) *sealer {
	key = bytes.Clone(key)
	s := &sealer{subj: map[string][]byte{}}
	s.pool.New = func() any { return hmac.New(sha256.New, key) }
	for _, sub := range subjects {
		s.subj[sub] = []byte(sub)
	}
	return s
}

// seal appends ts and the tag to body, for subject subj, and returns the
// message (body's array is reused when it has room).
func (s *sealer) seal(subj string, body []byte, now time.Time) []byte {
	body = binary.BigEndian.AppendUint64(body, uint64(now.UnixMilli()))
	h := s.mac(subj, body)
	defer s.pool.Put(h)
	return h.Sum(body)
}

// open checks a message received on subject subj and returns its body.
func (s *sealer) open(subj string, msg []byte, now time.Time) ([]byte, error) {
	if len(msg) > MaxMessage {
		return nil, errTooLarge
	}
	if !s.verify(subj, msg) {
		if bytes.HasPrefix(msg, []byte(`{"v":1,`)) {
			return nil, errVersion // a replica of the unsigned version, during an upgrade
		}
		return nil, errBadTag
	}
	signed := msg[:len(msg)-tagSize]
	ts := int64(binary.BigEndian.Uint64(signed[len(signed)-tsSize:]))
	if d := now.UnixMilli() - ts; d > MaxSkew.Milliseconds() || d < -MaxSkew.Milliseconds() {
		return nil, errStale
	}
	return signed[:len(signed)-tsSize], nil
}

// verify reports whether msg ends in the tag of the rest, in constant
// time.
func (s *sealer) verify(subj string, msg []byte) bool {
	if len(msg) < trailer {
		return false
	}
	signed, tag := msg[:len(msg)-tagSize], msg[len(msg)-tagSize:]
	h := s.mac(subj, signed)
	defer s.pool.Put(h)
	var sum [tagSize]byte
	return hmac.Equal(h.Sum(sum[:0]), tag)
}

var zero = []byte{0}

// mac is a hash from the pool that has read subj and signed; the caller
// puts it back.
func (s *sealer) mac(subj string, signed []byte) hash.Hash {
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	sb, ok := s.subj[subj]
	if !ok {
		sb = []byte(subj)
	}
	h.Write(sb)
	h.Write(zero)
	h.Write(signed)
	return h
}
