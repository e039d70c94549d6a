package fleet

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

const testSubj = "irisgate.frames"

// A sealed message opens to its body on its subject, within the window;
// anything else is refused, for the reason it is.
func TestSealOpen(t *testing.T) {
	s := newSealer(testKey, testSubj)
	now := time.UnixMilli(1_800_000_000_000)
	body := []byte(`{"v":2,"o":"ab","k":"c","c":7}`)
	sealed := func(at time.Time) []byte { return s.seal(testSubj, bytes.Clone(body), at) }
	if got, err := s.open(testSubj, sealed(now), now); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("opened %q, %v", got, err)
	}
	if len(sealed(now)) != len(body)+trailer {
		t.Fatalf("a sealed message is %d bytes, want %d", len(sealed(now)), len(body)+trailer)
	}
	// Within the window either way, as replicas' clocks may be.
	for _, at := range []time.Time{now.Add(-MaxSkew), now.Add(MaxSkew)} {
		if _, err := s.open(testSubj, sealed(at), now); err != nil {
			t.Fatalf("sent at %v, received at %v: %v", at, now, err)
		}
	}
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 1; return b }
	good := sealed(now)
	for name, c := range map[string]struct {
		msg  []byte
		subj string
		want error
	}{
		"unsigned":          {body, testSubj, errBadTag},
		"empty":             {nil, testSubj, errBadTag},
		"the unsigned v1":   {[]byte(`{"v":1,"o":"ab","k":"c","c":7}`), testSubj, errVersion},
		"another key":       {newSealer(bytes.Repeat([]byte{1}, KeySize)).seal(testSubj, bytes.Clone(body), now), testSubj, errBadTag},
		"body altered":      {flip(good, 3), testSubj, errBadTag},
		"time altered":      {flip(good, len(body)+tsSize-1), testSubj, errBadTag},
		"tag altered":       {flip(good, len(good)-1), testSubj, errBadTag},
		"tag cut":           {good[:len(good)-1], testSubj, errBadTag},
		"another subject":   {good, "irisgate.presence", errBadTag},
		"another fleet":     {good, "other.frames", errBadTag},
		"too old":           {sealed(now.Add(-MaxSkew - time.Millisecond)), testSubj, errStale},
		"from the future":   {sealed(now.Add(MaxSkew + time.Millisecond)), testSubj, errStale},
		"past MaxMessage":   {s.seal(testSubj, make([]byte, MaxMessage-trailer+1), now), testSubj, errTooLarge},
		"huge and unsigned": {make([]byte, MaxMessage+1), testSubj, errTooLarge},
	} {
		if got, err := s.open(c.subj, c.msg, now); err != c.want {
			t.Errorf("%s: %q, %v; want %v", name, got, err, c.want)
		}
	}
	// The largest body encode makes still opens.
	big := s.seal(testSubj, make([]byte, MaxMessage-trailer), now)
	if _, err := s.open(testSubj, big, now); err != nil {
		t.Fatalf("a message of MaxMessage: %v", err)
	}
}

// New refuses to run a fleet whose messages it could not sign.
func TestNewNeedsKey(t *testing.T) {
	st := openStore(t)
	for _, key := range [][]byte{nil, make([]byte, KeySize-1)} {
		_, err := New(st, nil, Config{URL: "nats://127.0.0.1:1", Key: key})
		if err == nil || !strings.Contains(err.Error(), "key of at least 32 bytes") {
			t.Fatalf("a key of %d bytes: %v", len(key), err)
		}
	}
}

// refusals is how many messages f refused for reason.
func refusals(f *Fleet, reason string) int {
	var m dto.Metric
	if err := f.met.invalid.WithLabelValues(reason).Write(&m); err != nil {
		return -1
	}
	return int(m.GetCounter().GetValue())
}

// A NATS peer without the fleet's key — publishing unsigned, signed with
// another key, a replica's message altered, or one dated outside the
// window — relays no frame to a device and gives no command to the
// replica running a lane's turn. Each forgery is made from a message that
// is delivered once signed right (the control below), so each is refused
// for what it lacks, and that nothing got through is proven by the next
// thing the device and the command callback get: the control.
func TestForgedMessagesRefused(t *testing.T) {
	ns := startNATS(t, -1)
	st := openStore(t)
	a := newReplica(t, st, ns.ClientURL())
	cmds := make(chan Command, 64)
	b := newReplica(t, st, ns.ClientURL(), func(c *Config) { c.Command = func(c Command) { cmds <- c } })
	eventually(t, "both connected", func() bool { return a.fleet.Connected() && b.fleet.Connected() })
	// Their subscriptions are sent as New returns; once a flush of each
	// connection is answered the server has them (it reads a client's
	// protocol in order), so the peer's first messages are not published
	// into the void.
	for _, r := range []*replica{a, b} {
		if err := r.fleet.nc.Load().Flush(); err != nil {
			t.Fatal(err)
		}
	}
	phone := connect(t, b, "phone")

	peer, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	frames, pres := "irisgate.frames", "irisgate.presence"
	right := newSealer(testKey)
	wrong := newSealer(bytes.Repeat([]byte{0xa5}, KeySize))
	lane := core.Lane{ChatID: "c"}
	transient := func(text string) []byte {
		body, err := encodeTransient("f0f0", 0, &core.Event{Type: core.EvMessageUpdate, Lane: lane, StreamID: "s", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	commandBody := func(c *command) []byte {
		body, err := encode(&message{V: WireVersion, Origin: "f0f0", Kind: kindCommand, Cmd: c})
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	pick := func(value string) []byte {
		return commandBody(&command{Op: opPick, Chat: lane.ChatID, Picker: "pk_1", Value: value, Device: "phone"})
	}
	stop := commandBody(&command{Op: opStop, Chat: "stopped"})
	now := time.Now()
	publish := func(subj string, msg []byte) {
		t.Helper()
		if err := peer.Publish(subj, msg); err != nil {
			t.Fatal(err)
		}
	}
	// alter changes what a replica signed, as a peer on the way would.
	alter := func(msg []byte, from, to string) []byte {
		return bytes.Replace(bytes.Clone(msg), []byte(from), []byte(to), 1)
	}
	v1 := func(body []byte) []byte { return bytes.Replace(body, []byte(`{"v":2,`), []byte(`{"v":1,`), 1) }
	publish(frames, right.seal(frames, transient("ready"), time.Now()))
	publish(pres, right.seal(pres, pick("ready"), time.Now()))
	if got := phone.next(); got != "message.update 0 ready" {
		t.Fatalf("the phone got %q", got)
	}
	if got := nextCommand(t, cmds); got.Value != "ready" {
		t.Fatalf("command %+v", got)
	}

	sent := map[string]int{}
	forge := func(subj string, body []byte, altered func([]byte) []byte) {
		publish(subj, bytes.Clone(body)) // unsigned
		publish(subj, v1(body))          // unsigned, as version 1 was
		publish(subj, wrong.seal(subj, bytes.Clone(body), now))
		publish(subj, altered(right.seal(subj, bytes.Clone(body), now)))
		publish(subj, right.seal(subj, bytes.Clone(body), now.Add(-MaxSkew-5*time.Second))) // captured earlier
		publish(subj, right.seal(subj, bytes.Clone(body), now.Add(MaxSkew+5*time.Second)))
		other := frames
		if subj == frames {
			other = pres
		}
		publish(subj, right.seal(other, bytes.Clone(body), now)) // signed for the other subject
		sent["bad_tag"] += 4
		sent["version"]++
		sent["stale"] += 2
	}
	forge(frames, transient("forged"), func(m []byte) []byte { return alter(m, "forged", "FORGED") })
	forge(pres, pick("once"), func(m []byte) []byte { return alter(m, `"once"`, `"here"`) })
	forge(pres, stop, func(m []byte) []byte { return alter(m, "stopped", "stopper") })
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	for reason, n := range sent {
		eventually(t, fmt.Sprintf("b refuses %d forgeries for %s", n, reason), func() bool { return refusals(b.fleet, reason) == n })
		if got := refusals(a.fleet, reason); got > n {
			t.Fatalf("a refused %d for %s, more than were sent", got, reason)
		}
	}
	t.Logf("b refused: bad_tag %d, version %d, stale %d", refusals(b.fleet, "bad_tag"), refusals(b.fleet, "version"), refusals(b.fleet, "stale"))
	if refusals(b.fleet, "malformed") != 0 {
		t.Fatal("a forgery reached the decoder")
	}

	// The control: the same messages signed with the fleet's key are
	// taken, and are the first thing the device and the callback get.
	publish(frames, right.seal(frames, transient("signed"), time.Now()))
	publish(pres, right.seal(pres, pick("once"), time.Now()))
	publish(pres, right.seal(pres, stop, time.Now()))
	if got := phone.next(); got != "message.update 0 signed" {
		t.Fatalf("the phone got %q first, want the signed frame", got)
	}
	want := []Command{
		{Lane: lane, Picker: "pk_1", Value: "once", Device: "phone"},
		{Stop: true, Lane: core.Lane{ChatID: "stopped"}},
	}
	for _, w := range want {
		if got := nextCommand(t, cmds); got != w {
			t.Fatalf("command %+v, want %+v", got, w)
		}
	}
	// And a replica's own, through its fleet, as ever.
	a.hub.Publish(&core.Event{Type: core.EvMessageUpdate, StreamID: "s", Text: "from a"})
	a.fleet.ForwardPick(lane, "phone", "pk_2", "always")
	if got := phone.next(); got != "message.update 0 from a" {
		t.Fatalf("the phone got %q, want a's frame", got)
	}
	if got, w := nextCommand(t, cmds), (Command{Lane: lane, Picker: "pk_2", Value: "always", Device: "phone"}); got != w {
		t.Fatalf("command %+v, want %+v", got, w)
	}
	// A durable frame is still a's cursor, read from the store.
	ev := &core.Event{Type: core.EvNotification, Notification: &core.Notification{Title: "durable"}, TS: 1}
	if err := st.Write(context.Background(), func(tx store.Tx) error {
		var err error
		ev.Cursor, _, err = tx.AppendEvent(ev)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	a.hub.Publish(ev)
	if got := phone.next(); got != "notification 1 durable" {
		t.Fatalf("the phone got %q", got)
	}
	select {
	case c := <-cmds:
		t.Fatalf("an extra command: %+v", c)
	default:
	}
}

func nextCommand(t *testing.T, cmds chan Command) Command {
	t.Helper()
	select {
	case c := <-cmds:
		return c
	case <-time.After(wait):
		t.Fatal("no command came")
		return Command{}
	}
}

// BenchmarkSealOpen: signing and checking one transient frame of a few
// hundred bytes (406 signed), the per-message cost the fleet's signatures add; compare
// BenchmarkDecodeTransient, the JSON decoding every message had before.
func BenchmarkSealOpen(b *testing.B) {
	body := benchBody(b)
	s := newSealer(testKey, testSubj)
	buf := make([]byte, 0, len(body)+trailer)
	now := time.Now()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		msg := s.seal(testSubj, append(buf[:0], body...), now)
		if _, err := s.open(testSubj, msg, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeTransient(b *testing.B) {
	body := benchBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

func benchBody(b *testing.B) []byte {
	body, err := encodeTransient("0123456789abcdef", 12345, &core.Event{Type: core.EvMessageUpdate,
		Lane: core.Lane{ChatID: "default"}, StreamID: "st_0123456789", Text: strings.Repeat("streamed text ", 16)})
	if err != nil {
		b.Fatal(err)
	}
	return body
}
