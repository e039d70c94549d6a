package postgres

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

func TestDevicesKeepWhatHelloSays(t *testing.T) {
	s := open(t)
	if err := s.SeeDevice(bg, store.Device{ID: "phone", Name: "Pixel", FCMToken: "fcm1"}); err != nil {
		t.Fatal(err)
	}
	// A later hello without a name or token keeps them.
	if err := s.SeeDevice(bg, store.Device{ID: "phone", NtfyTopic: "topic"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveProofs(bg, "phone", []core.CursorRange{{Lo: 1, Hi: 5}}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Device(bg, "phone")
	if err != nil || d.Name != "Pixel" || d.FCMToken != "fcm1" || d.NtfyTopic != "topic" {
		t.Fatalf("device %+v, %v", d, err)
	}
	if p, err := s.LoadProofs(bg, "phone"); err != nil || len(p) != 1 || p[0] != (core.CursorRange{Lo: 1, Hi: 5}) {
		t.Fatalf("proofs %v, %v", p, err)
	}
	if n, err := s.DeviceName(bg, "phone"); err != nil || n != "Pixel" {
		t.Fatalf("name %q, %v", n, err)
	}
	if n, err := s.DeviceName(bg, "nobody"); err != nil || n != "" {
		t.Fatalf("an unknown device's name %q, %v", n, err)
	}
	if err := s.SetPushRegistration(bg, "phone", "", "topic2"); err != nil {
		t.Fatal(err)
	}
	s.SetLastPushed(bg, "phone", 9)
	s.SetLastPushed(bg, "phone", 4) // never moves back
	if c, err := s.LastPushed(bg, "phone"); err != nil || c != 9 {
		t.Fatalf("last pushed %d, %v", c, err)
	}
	if ds, err := s.PushDevices(bg); err != nil || len(ds) != 1 || ds[0].FCMToken != "" || ds[0].NtfyTopic != "topic2" || ds[0].LastPushedCursor != 9 {
		t.Fatalf("push devices %+v, %v", ds, err)
	}
	if err := s.DropPushRegistration(bg, "phone", "ntfy"); err != nil {
		t.Fatal(err)
	}
	if err := s.DropPushRegistration(bg, "phone", "carrier-pigeon"); err != nil {
		t.Fatal(err)
	}
	if ds, _ := s.PushDevices(bg); len(ds) != 0 {
		t.Fatalf("push devices after the drop: %+v", ds)
	}
}

func TestTokens(t *testing.T) {
	s := open(t)
	t0 := time.UnixMilli(1_700_000_000_000)
	for i, id := range []string{"tok_b", "tok_a"} {
		if err := s.AddToken(bg, store.Token{ID: id, Hash: []byte{byte(i), 0, 0xff}, Name: "n" + id, DeviceID: "phone", Created: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddToken(bg, store.Token{ID: "tok_c", Hash: []byte{0, 0, 0xff}, Created: t0}); err == nil {
		t.Fatal("a second token with the same hash was stored")
	}
	if err := s.TouchToken(bg, "tok_a"); err != nil {
		t.Fatal(err)
	}
	ts, err := s.Tokens(bg)
	if err != nil || len(ts) != 2 || ts[0].ID != "tok_b" || !bytes.Equal(ts[1].Hash, []byte{1, 0, 0xff}) || !ts[0].Created.Equal(t0) ||
		!ts[0].LastUsed.IsZero() || ts[1].LastUsed.IsZero() || ts[1].DeviceID != "phone" {
		t.Fatalf("tokens %+v, %v", ts, err)
	}
	if err := s.RevokeToken(bg, "tok_b"); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(bg, "tok_b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoking twice: %v", err)
	}
}

// The push queue merges news for one device and collapse key, keeps the
// most urgent content, and finishes only the version it sent.
func TestPushQueueMerges(t *testing.T) {
	s := open(t)
	t0 := time.UnixMilli(1_800_000_000_000)
	hold := t0.Add(2 * time.Second)
	job := store.PushJob{DeviceID: "phone", Collapse: "chan_1", Cursor: 5, Title: "approval", Body: "run ls?", ChatID: "chan_1", Kind: "approval", Priority: 4, MessageID: "m1", NextAt: hold}
	if err := s.EnqueuePush(bg, job, t0); err != nil {
		t.Fatal(err)
	}
	// Ordinary news during the hold: the approval's content stays, the
	// cursor moves on, the hold is kept.
	if err := s.EnqueuePush(bg, store.PushJob{DeviceID: "phone", Collapse: "chan_1", Cursor: 7, Title: "message", Body: "hi", ChatID: "chan_1", Kind: "message", NextAt: t0.Add(3 * time.Second)}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.DuePushes(bg, t0.Add(time.Second), 10); len(due) != 0 {
		t.Fatalf("due during its hold: %+v", due)
	}
	due, err := s.DuePushes(bg, hold, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due %+v, %v", due, err)
	}
	j := due[0]
	if j.Title != "approval" || j.Kind != "approval" || j.Priority != 4 || j.Cursor != 7 || j.MessageID != "m1" || !j.NextAt.Equal(hold) || j.Gen != 1 {
		t.Fatalf("merged %+v", j)
	}
	// Newer news while it is being sent: the send's DonePush leaves it.
	if err := s.EnqueuePush(bg, store.PushJob{DeviceID: "phone", Collapse: "chan_1", Cursor: 8, Title: "approval 2", Kind: "approval", Priority: 4, NextAt: hold}, hold); err != nil {
		t.Fatal(err)
	}
	if err := s.DonePush(bg, j); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PendingPushes(bg); n != 1 {
		t.Fatalf("%d pending after finishing a replaced version", n)
	}
	due, _ = s.DuePushes(bg, hold, 10)
	if len(due) != 1 || due[0].Title != "approval 2" {
		t.Fatalf("due %+v", due)
	}
	if err := s.RetryPush(bg, due[0], hold.Add(time.Minute), "503"); err != nil {
		t.Fatal(err)
	}
	due, _ = s.DuePushes(bg, hold.Add(time.Minute), 10)
	if len(due) != 1 || due[0].Attempts != 1 || due[0].LastErr != "503" {
		t.Fatalf("retried %+v", due)
	}
	if err := s.DonePush(bg, due[0]); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PendingPushes(bg); n != 0 {
		t.Fatalf("%d pending", n)
	}
}

func TestApprovals(t *testing.T) {
	s := open(t)
	if ok, err := s.Approved(bg, "ls -la"); ok || err != nil {
		t.Fatalf("approved before: %v %v", ok, err)
	}
	for range 2 {
		if err := s.Approve(bg, "ls -la"); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.Approved(bg, "ls -la"); !ok || err != nil {
		t.Fatalf("approved after: %v %v", ok, err)
	}
}

// What PostgreSQL could get wrong where the contract does not look: in
// tokenAlive's LIKE an unescaped _ would match any character, making a
// configured token named "tokyo" look like a revoked stored one; the
// revoke takes the revoked devices' queued pushes and nobody else's; a
// later hello without a token keeps the one remembered.
func TestRevokeEndsPushOfItsDevicesOnly(t *testing.T) {
	s := open(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.AddToken(bg, store.Token{ID: "tok_a", Hash: []byte("a"), Created: time.UnixMilli(1)}))
	must(s.SeeDevice(bg, store.Device{ID: "phone", FCMToken: "f1", TokenID: "tok_a"}))
	must(s.SeeDevice(bg, store.Device{ID: "phone", Name: "Pixel"}))
	must(s.SeeDevice(bg, store.Device{ID: "tokyo", NtfyTopic: "t", TokenID: "tokyo"}))
	t0 := time.UnixMilli(1_800_000_000_000)
	for _, id := range []string{"phone", "tokyo"} {
		must(s.EnqueuePush(bg, store.PushJob{DeviceID: id, Collapse: "c", Cursor: 1, NextAt: t0}, t0))
	}
	if d, err := s.Device(bg, "phone"); err != nil || d.TokenID != "tok_a" || d.Revoked || d.Name != "Pixel" {
		t.Fatalf("before the revoke: %+v, %v", d, err)
	}
	must(s.RevokeToken(bg, "tok_a"))
	if d, err := s.Device(bg, "phone"); err != nil || d.TokenID != "tok_a" || !d.Revoked || d.FCMToken != "" {
		t.Fatalf("after the revoke: %+v, %v", d, err)
	}
	if d, err := s.Device(bg, "tokyo"); err != nil || d.Revoked || d.NtfyTopic != "t" {
		t.Fatalf("a configured token named tok…: %+v, %v", d, err)
	}
	due, err := s.DuePushes(bg, t0, 10)
	if err != nil || len(due) != 1 || due[0].DeviceID != "tokyo" {
		t.Fatalf("queued after the revoke: %+v, %v; want tokyo's alone", due, err)
	}
	if ds, err := s.PushDevices(bg); err != nil || len(ds) != 1 || ds[0].ID != "tokyo" {
		t.Fatalf("push devices: %+v, %v", ds, err)
	}
	if err := s.RevokeToken(bg, "tok_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoking it again: %v", err)
	}
	if n, err := s.DropPushOfRevoked(bg, "tok_a\x00"); err != nil || n != 0 {
		t.Fatalf("dropping for a token text cannot hold: %d, %v", n, err)
	}
}

// DeleteDevices forgets the devices named and no other, and an id
// PostgreSQL's text cannot hold is nothing to forget, not an error.
func TestDeleteDevices(t *testing.T) {
	s := open(t)
	for _, id := range []string{"a", "b"} {
		if err := s.SeeDevice(bg, store.Device{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteDevices(bg, []string{"a", "bad\x00", "\xff"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.DeviceName(bg, "a"); n != "" {
		t.Fatalf("a kept its name %q", n)
	}
	if n, _ := s.DeviceName(bg, "b"); n != "b" {
		t.Fatalf("b lost its name: %q", n)
	}
	// Oldest first, and past the newest keep.
	if err := s.SeeDevice(bg, store.Device{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	rawExec(t, s, `UPDATE devices SET last_seen = 5 WHERE device_id = 'c'`)
	if ids, err := s.StaleDevices(bg, 1, 0, 10); err != nil || len(ids) != 1 || ids[0] != "c" {
		t.Fatalf("stale past keeping one: %v, %v; want c", ids, err)
	}
}
