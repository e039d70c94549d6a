package storetest

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

var deviceTests = []test{
	{"DevicesRoundTrip", testDevices},
	{"ProofsRoundTrip", testProofs},
	{"StaleDevicesAreForgotten", testStaleDevices},
	{"RevokedTokensPushNoMore", testDropPushOfRevoked},
}

var pushTests = []test{
	{"PushQueueMergesABurst", testPushMerges},
	{"PushQueueRestartsWhatWasDueOrTried", testPushRestarts},
	{"PushQueueFinishesOnlyTheVersionSent", testPushVersions},
	{"PushQueueDueOrder", testPushDueOrder},
}

var tokenTests = []test{
	{"Tokens", testTokens},
}

func testDevices(t *testing.T, s Store) {
	if d, err := s.Device(bg, "unknown"); err != nil || d != (store.Device{ID: "unknown"}) {
		t.Fatalf("a device never seen: %+v, %v", d, err)
	}
	if c, err := s.LastPushed(bg, "unknown"); err != nil || c != 0 {
		t.Fatalf("its last pushed cursor: %d, %v", c, err)
	}
	if n, err := s.DeviceName(bg, "unknown"); err != nil || n != "" {
		t.Fatalf("its name: %q, %v", n, err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SeeDevice(bg, store.Device{ID: "phone", Name: "Pixel", FCMToken: "fcm-1", NtfyTopic: "topic-1"}))
	must(s.SeeDevice(bg, store.Device{ID: "phone"})) // a hello without name or addresses keeps them
	must(s.SeeDevice(bg, store.Device{ID: "quiet", Name: "No push"}))
	sub := record.WebPush{Endpoint: "https://push.example/x", Keys: record.WebPushKeys{P256dh: "p", Auth: "a"}}
	must(s.SetWebPush(bg, "browser", sub))
	if err := s.SetWebPush(bg, "browser", record.WebPush{Endpoint: "http://plain"}); err == nil {
		t.Fatal("an unusable subscription was stored")
	}
	must(s.SetLastPushed(bg, "phone", 12))
	must(s.SetLastPushed(bg, "phone", 8)) // never moves back
	sub.V = record.Version
	d, err := s.Device(bg, "phone")
	if err != nil || d.Name != "Pixel" || d.FCMToken != "fcm-1" || d.NtfyTopic != "topic-1" || d.WebPush != nil || d.LastPushedCursor != 12 {
		t.Fatalf("phone: %+v, %v", d, err)
	}
	if c, _ := s.LastPushed(bg, "phone"); c != 12 {
		t.Fatalf("last pushed %d", c)
	}
	if n, _ := s.DeviceName(bg, "phone"); n != "Pixel" {
		t.Fatalf("name %q", n)
	}
	if d, _ := s.Device(bg, "browser"); d.WebPush == nil || *d.WebPush != sub {
		t.Fatalf("browser: %+v", d)
	}
	ds, err := s.PushDevices(bg)
	if err != nil || len(ds) != 2 {
		t.Fatalf("push devices: %+v, %v; want phone and browser", ds, err)
	}
	// fcm.register replaces both addresses; a gone registration is
	// dropped alone.
	must(s.SetPushRegistration(bg, "phone", "", "topic-2"))
	must(s.SetPushRegistration(bg, "tablet", "fcm-t", ""))
	must(s.DropPushRegistration(bg, "browser", "webpush"))
	must(s.DropPushRegistration(bg, "tablet", "ntfy"))
	must(s.DropPushRegistration(bg, "tablet", "carrier pigeon"))
	if d, _ := s.Device(bg, "phone"); d.FCMToken != "" || d.NtfyTopic != "topic-2" || d.Name != "Pixel" {
		t.Fatalf("phone after fcm.register: %+v", d)
	}
	if d, _ := s.Device(bg, "tablet"); d.FCMToken != "fcm-t" {
		t.Fatalf("tablet after dropping what it does not have: %+v", d)
	}
	must(s.DropPushRegistration(bg, "tablet", "fcm"))
	ds, _ = s.PushDevices(bg)
	if len(ds) != 1 || ds[0].ID != "phone" {
		t.Fatalf("push devices after the drops: %+v", ds)
	}
	// The hub's proofs of delivery leave the device's other state alone
	// (ProofsRoundTrip checks the proofs themselves).
	must(s.SaveProofs(bg, "phone", []core.CursorRange{{Lo: 1, Hi: 5}, {Lo: 9, Hi: 9}}))
	if d, _ := s.Device(bg, "phone"); d.Name != "Pixel" || d.LastPushedCursor != 12 {
		t.Fatalf("phone after its proofs were saved: %+v", d)
	}
}

func job(dev, collapse string, prio int, body string, cursor int64, at time.Time) store.PushJob {
	return store.PushJob{DeviceID: dev, Collapse: collapse, Priority: prio, Title: "t", Body: body, Kind: "message",
		ChatID: "default", Cursor: cursor, MessageID: "m-" + body, NextAt: at}
}

func due(t *testing.T, s Store, at time.Time) []store.PushJob {
	t.Helper()
	js, err := s.DuePushes(bg, at, 100)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// A burst for one device and lane is one push: the most urgent news is
// shown (the newer on a tie), the cursor is the newest, and a push still
// waiting out its hold keeps its time.
func testPushMerges(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	hold := t0.Add(3 * time.Second)
	for _, j := range []store.PushJob{
		job("phone", "default", 4, "approve?", 5, hold),
		job("phone", "default", 3, "a message", 7, t0.Add(5*time.Second)),
		job("phone", "chan_b", 0, "other lane", 2, hold),
		job("tablet", "default", 3, "to the tablet", 7, hold),
	} {
		if err := s.EnqueuePush(bg, j, t0); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.PendingPushes(bg); err != nil || n != 3 {
		t.Fatalf("%d pending, %v; want one per device and lane", n, err)
	}
	if js := due(t, s, t0.Add(time.Second)); len(js) != 0 {
		t.Fatalf("due during the hold: %+v", js)
	}
	js := due(t, s, hold)
	if len(js) != 3 {
		t.Fatalf("due after the hold: %+v", js)
	}
	var p store.PushJob
	for _, j := range js {
		if j.DeviceID == "phone" && j.Collapse == "default" {
			p = j
		}
		if j.Collapse == "chan_b" && j.Priority != 3 {
			t.Fatalf("no priority given is the default, 3: %+v", j)
		}
	}
	if p.Body != "approve?" || p.MessageID != "m-approve?" || p.Priority != 4 || p.Cursor != 7 || !p.NextAt.Equal(hold) || p.Attempts != 0 {
		t.Fatalf("merged push: %+v", p)
	}
	if err := s.EnqueuePush(bg, job("phone", "default", 4, "another approval", 6, hold), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, j := range due(t, s, hold) {
		if j.DeviceID == "phone" && j.Collapse == "default" && (j.Body != "another approval" || j.Cursor != 7) {
			t.Fatalf("on a tie the newer news, with the newest cursor: %+v", j)
		}
	}
}

// News for a push that is due, or was tried, restarts it: a new time and
// fresh attempts.
func testPushRestarts(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	if err := s.EnqueuePush(bg, job("phone", "default", 3, "first", 1, t0), t0); err != nil {
		t.Fatal(err)
	}
	js := due(t, s, t0)
	if len(js) != 1 {
		t.Fatalf("due: %+v", js)
	}
	if err := s.RetryPush(bg, js[0], t0.Add(time.Minute), "503 from the service"); err != nil {
		t.Fatal(err)
	}
	tried := due(t, s, t0.Add(time.Minute))
	if len(tried) != 1 || tried[0].Attempts != 1 || tried[0].LastErr != "503 from the service" {
		t.Fatalf("after a retry: %+v", tried)
	}
	later := t0.Add(10 * time.Second)
	if err := s.EnqueuePush(bg, job("phone", "default", 3, "second", 2, later), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	js = due(t, s, later)
	if len(js) != 1 || js[0].Body != "second" || js[0].Attempts != 0 || js[0].LastErr != "" || !js[0].NextAt.Equal(later) {
		t.Fatalf("news for a tried push: %+v", js)
	}
}

// A send finishes (or retries) only the version it sent: news that came
// while the request was under way is still to be sent.
func testPushVersions(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	if err := s.EnqueuePush(bg, job("phone", "default", 3, "first", 1, t0), t0); err != nil {
		t.Fatal(err)
	}
	sent := due(t, s, t0)[0]
	if err := s.EnqueuePush(bg, job("phone", "default", 3, "news meanwhile", 2, t0), t0); err != nil {
		t.Fatal(err)
	}
	if err := s.DonePush(bg, sent); err != nil {
		t.Fatal(err)
	}
	if err := s.RetryPush(bg, sent, t0.Add(time.Hour), "stale"); err != nil {
		t.Fatal(err)
	}
	js := due(t, s, t0)
	if len(js) != 1 || js[0].Body != "news meanwhile" || js[0].Attempts != 0 || js[0].Gen == sent.Gen {
		t.Fatalf("after finishing the older version: %+v", js)
	}
	if err := s.DonePush(bg, js[0]); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PendingPushes(bg); n != 0 {
		t.Fatalf("%d pending after the last version was sent", n)
	}
}

func testPushDueOrder(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	for i, dev := range []string{"d3", "d1", "d2", "d4"} {
		at := t0.Add(time.Duration([]int{3, 1, 2, 1}[i]) * time.Second)
		if err := s.EnqueuePush(bg, job(dev, "default", 3, dev, int64(i), at), t0); err != nil {
			t.Fatal(err)
		}
	}
	js, err := s.DuePushes(bg, t0.Add(2*time.Second), 2)
	if err != nil || len(js) != 2 || js[0].DeviceID != "d1" || js[1].DeviceID != "d4" {
		t.Fatalf("the two oldest due: %+v, %v", js, err)
	}
	if js := due(t, s, t0.Add(2*time.Second)); len(js) != 3 || js[2].DeviceID != "d2" {
		t.Fatalf("all due: %+v", js)
	}
}

func testTokens(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	toks := []store.Token{
		{ID: "tok_b", Hash: []byte("hash-b"), Name: "phone", DeviceID: "phone", Created: t0},
		{ID: "tok_a", Hash: []byte("hash-a"), Name: "cli", Created: t0},
		{ID: "tok_c", Hash: []byte("hash-c"), Created: t0.Add(-time.Hour)},
	}
	for _, tk := range toks {
		if err := s.AddToken(bg, tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddToken(bg, store.Token{ID: "tok_d", Hash: []byte("hash-a"), Created: t0}); err == nil {
		t.Fatal("a second token with the same hash was stored")
	}
	if err := s.AddToken(bg, store.Token{ID: "tok_a", Hash: []byte("hash-x"), Created: t0}); err == nil {
		t.Fatal("a second token with the same id was stored")
	}
	got, err := s.Tokens(bg)
	if err != nil || len(got) != 3 {
		t.Fatalf("tokens %+v, %v", got, err)
	}
	for i, want := range []store.Token{toks[2], toks[1], toks[0]} { // oldest first, then by id
		g := got[i]
		if g.ID != want.ID || !bytes.Equal(g.Hash, want.Hash) || g.Name != want.Name || g.DeviceID != want.DeviceID ||
			!g.Created.Equal(want.Created) || !g.LastUsed.IsZero() {
			t.Fatalf("token %d: %+v, want %+v", i, g, want)
		}
	}
	before := time.Now().Add(-time.Second)
	if err := s.TouchToken(bg, "tok_a"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Tokens(bg)
	if u := got[1].LastUsed; u.Before(before) || u.After(time.Now().Add(time.Second)) {
		t.Fatalf("last used %v after a touch", u)
	}
	if err := s.RevokeToken(bg, "tok_b"); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(bg, "tok_b"); !notFound(err) {
		t.Fatalf("revoking it again: %v", err)
	}
	if got, _ := s.Tokens(bg); len(got) != 2 {
		t.Fatalf("after a revoke: %+v", got)
	}
}

// A device's proofs come back as they were saved, replace the set before
// them, and live beside the device's other columns without touching them.
func testProofs(t *testing.T, s Store) {
	if p, err := s.LoadProofs(bg, "unknown"); err != nil || len(p) != 0 {
		t.Fatalf("a device never seen has proofs %v, %v", p, err)
	}
	if err := s.SeeDevice(bg, store.Device{ID: "phone", Name: "Pixel"}); err != nil {
		t.Fatal(err)
	}
	set := []core.CursorRange{{Lo: 1, Hi: 40}, {Lo: 42, Hi: 42}, {Lo: 50, Hi: 1 << 40}}
	if err := s.SaveProofs(bg, "phone", set); err != nil {
		t.Fatal(err)
	}
	if p, err := s.LoadProofs(bg, "phone"); err != nil || !slices.Equal(p, set) {
		t.Fatalf("loaded %v, %v; saved %v", p, err, set)
	}
	if n, _ := s.DeviceName(bg, "phone"); n != "Pixel" {
		t.Fatalf("saving proofs changed the name to %q", n)
	}
	// A later set replaces the earlier (retention pruned below 42).
	if err := s.SaveProofs(bg, "phone", set[1:]); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.LoadProofs(bg, "phone"); !slices.Equal(p, set[1:]) {
		t.Fatalf("after a second save: %v", p)
	}
	// Proofs of a device the store has not seen make its row; its hello
	// keeps them.
	if err := s.SaveProofs(bg, "tablet", set[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.SeeDevice(bg, store.Device{ID: "tablet", Name: "Tab"}); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.LoadProofs(bg, "tablet"); !slices.Equal(p, set[:1]) {
		t.Fatalf("the tablet's proofs after its hello: %v", p)
	}
	if err := s.SaveProofs(bg, "tablet", nil); err != nil {
		t.Fatal(err)
	}
	if p, err := s.LoadProofs(bg, "tablet"); err != nil || len(p) != 0 {
		t.Fatalf("an emptied set loads as %v, %v", p, err)
	}
}

// The device rows stay bounded: past the newest keep, or seen before a
// time, a device without a push registration is stale; one with a
// registration never is (it is how a phone that is away is woken).
func testStaleDevices(t *testing.T, s Store) {
	for _, d := range []store.Device{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "pushed", FCMToken: "fcm"}} {
		if err := s.SeeDevice(bg, d); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.StaleDevices(bg, 0, 0, 10)
	if err != nil || len(all) != 3 || slices.Contains(all, "pushed") {
		t.Fatalf("past keeping none: %v, %v; want a, b and c", all, err)
	}
	if some, err := s.StaleDevices(bg, 1, 0, 10); err != nil || len(some) != 2 || slices.Contains(some, "pushed") {
		t.Fatalf("past keeping one: %v, %v; want two of a, b, c", some, err)
	}
	if none, err := s.StaleDevices(bg, 10, 0, 10); err != nil || len(none) != 0 {
		t.Fatalf("keeping ten: %v, %v", none, err)
	}
	future := time.Now().Add(time.Hour).UnixMilli()
	if old, err := s.StaleDevices(bg, 10, future, 10); err != nil || len(old) != 3 {
		t.Fatalf("all seen before an hour from now: %v, %v", old, err)
	}
	if one, err := s.StaleDevices(bg, 0, 0, 1); err != nil || len(one) != 1 {
		t.Fatalf("limit 1: %v, %v", one, err)
	}
	if err := s.DeleteDevices(bg, all); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDevices(bg, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range all {
		if n, _ := s.DeviceName(bg, id); n != "" {
			t.Fatalf("%s kept its name", id)
		}
	}
	if rest, _ := s.StaleDevices(bg, 0, future, 10); len(rest) != 0 {
		t.Fatalf("after deleting: %v", rest)
	}
	if d, _ := s.Device(bg, "pushed"); d.FCMToken != "fcm" {
		t.Fatalf("the device with push went: %+v", d)
	}
}

// A token revoked ends its devices' push registrations: RevokeToken in
// one transaction, DropPushOfRevoked for devices whose stored token went
// another way. Configured tokens (no tok_ prefix) cannot be revoked.
func testDropPushOfRevoked(t *testing.T, s Store) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.AddToken(bg, store.Token{ID: "tok_kept", Name: "kept", Hash: []byte("h1")}))
	must(s.AddToken(bg, store.Token{ID: "tok_stolen", Name: "stolen", Hash: []byte("h2")}))
	must(s.SeeDevice(bg, store.Device{ID: "kept", FCMToken: "f1", TokenID: "tok_kept"}))
	must(s.SeeDevice(bg, store.Device{ID: "stolen", FCMToken: "f2", TokenID: "tok_stolen"}))
	must(s.SeeDevice(bg, store.Device{ID: "lost", NtfyTopic: "t3", TokenID: "tok_never_stored"}))
	must(s.SeeDevice(bg, store.Device{ID: "env", FCMToken: "f4", TokenID: "env"}))
	must(s.RevokeToken(bg, "tok_stolen"))
	if d, _ := s.Device(bg, "stolen"); d.FCMToken != "" || !d.Revoked {
		t.Fatalf("the revoked token's phone: %+v", d)
	}
	ids := func() []string {
		ds, err := s.PushDevices(bg)
		must(err)
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		slices.Sort(out)
		return out
	}
	// A token that is gone is not woken even before its registration is
	// dropped.
	if got := ids(); !slices.Equal(got, []string{"env", "kept"}) {
		t.Fatalf("push devices %v, want env and kept", got)
	}
	if n, err := s.DropPushOfRevoked(bg, "tok_kept"); err != nil || n != 0 {
		t.Fatalf("dropping a live token's: %d, %v", n, err)
	}
	if n, err := s.DropPushOfRevoked(bg, ""); err != nil || n != 1 {
		t.Fatalf("dropping every gone token's: %d, %v; want the lost one", n, err)
	}
	if d, _ := s.Device(bg, "lost"); d.NtfyTopic != "" {
		t.Fatalf("lost kept its topic: %+v", d)
	}
	if d, _ := s.Device(bg, "kept"); d.FCMToken != "f1" {
		t.Fatalf("kept lost its registration: %+v", d)
	}
}
