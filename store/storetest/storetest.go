// Package storetest is the contract every irisgate store keeps, as a test
// suite: SQLite's (package store) runs it now, PostgreSQL's (issue 18)
// will run the same. A store's own tests call Run with a function that
// opens a fresh, empty store; the suite drives it through Store alone.
//
// What it holds a store to: outbox cursors gap-free and strictly
// increasing, across failed writes and concurrent writers; the prune
// floor; every record stored as it was given; deletes that take every
// row naming what they delete; the search query rules; cron's writers
// keeping each other's changes; the push queue's merging and versions;
// tokens, devices and media rows.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// Store is everything irisgate keeps in a store: the union of what its
// consumers ask for (gateway.Store, cron.Store, push.Store, media.Index). Tests of those packages assert that this covers
// their interfaces, so a store that passes the suite fills them all.
// hub.ProofStore is part of it too.
type Store interface {
	Write(ctx context.Context, fn func(store.Tx) error) error

	// The outbox.
	OutboxHead(ctx context.Context) (int64, error)
	OutboxFloor(ctx context.Context) (int64, error)
	OutboxCursors(ctx context.Context, after, upto int64, limit int) ([]int64, error)
	ScanEvents(ctx context.Context, after, upto int64, fn func(*core.Event) error) error
	ScanEventsSkipping(ctx context.Context, after, upto int64, fn func(*core.Event) error, bad func(cursor int64, err *store.CorruptError)) error
	PruneOutboxSome(ctx context.Context, keep, minTS int64, n int) (removed int64, more bool, err error)

	// The directory, history and search.
	Channels(ctx context.Context) ([]core.Channel, error)
	Channel(ctx context.Context, chatID string) (core.Channel, error)
	Message(ctx context.Context, id string) (core.Message, error)
	Streaming(ctx context.Context) ([]core.Message, error)
	History(ctx context.Context, lane core.Lane, beforeID string, limit int) ([]core.Message, bool, error)
	SearchPageBefore(ctx context.Context, query string, lane *core.Lane, before string, limit int) (store.SearchPage, error)

	// The agent's state.
	Conversation(ctx context.Context, lane core.Lane) ([]record.ConversationEntry, error)
	ConversationLen(ctx context.Context, lane core.Lane) (int, error)
	LaneSettings(ctx context.Context, lane core.Lane) (record.LaneSettings, error)
	Turns(ctx context.Context) ([]store.QueuedTurn, error)
	OwedCronRuns(ctx context.Context) ([]store.QueuedTurn, error)
	ForgetTurn(ctx context.Context, messageID string) error
	Approved(ctx context.Context, command string) (bool, error)
	Approve(ctx context.Context, command string) error

	// Devices, their push registrations and the hub's proofs of what
	// each has received.
	SeeDevice(ctx context.Context, d store.Device) error
	Device(ctx context.Context, id string) (store.Device, error)
	LastPushed(ctx context.Context, deviceID string) (int64, error)
	DeviceName(ctx context.Context, deviceID string) (string, error)
	PushDevices(ctx context.Context) ([]store.Device, error)
	SetPushRegistration(ctx context.Context, deviceID, fcmToken, ntfyTopic string) error
	SetWebPush(ctx context.Context, deviceID string, sub record.WebPush) error
	LoadProofs(ctx context.Context, deviceID string) ([]core.CursorRange, error)
	SaveProofs(ctx context.Context, deviceID string, proven []core.CursorRange) error
	StaleDevices(ctx context.Context, keep int, before int64, limit int) ([]string, error)
	DeleteDevices(ctx context.Context, ids []string) error
	DropPushOfRevoked(ctx context.Context, tokenID string) (int, error)

	// The push queue.
	EnqueuePush(ctx context.Context, j store.PushJob, now time.Time) error
	DuePushes(ctx context.Context, now time.Time, limit int) ([]store.PushJob, error)
	ClaimPushes(ctx context.Context, now, until time.Time, devices, limit int, busy []string) ([]store.PushJob, error)
	ReleasePush(ctx context.Context, j store.PushJob) error
	PendingPushes(ctx context.Context) (int, error)
	DonePush(ctx context.Context, j store.PushJob) error
	RetryPush(ctx context.Context, j store.PushJob, next time.Time, lastErr string) error
	SetLastPushed(ctx context.Context, deviceID string, cursor int64) error
	DropPushRegistration(ctx context.Context, deviceID, backend string) error

	// Tokens.
	Tokens(ctx context.Context) ([]store.Token, error)
	AddToken(ctx context.Context, t store.Token) error
	TouchToken(ctx context.Context, id string) error
	RevokeToken(ctx context.Context, id string) error

	// Media rows (the bytes are package media's).
	Upload(ctx context.Context, deviceID, ref string) (core.Media, error)
	Media(ctx context.Context, id string) (core.Media, error)
	HasBlob(ctx context.Context, sha256 string) (bool, error)
	UnusedBlobs(ctx context.Context, limit int) ([]string, error)
	ForgetBlob(ctx context.Context, sha256 string) (bool, error)
	ClaimBlob(ctx context.Context, sha256 string, size int64) error
	DropBlob(ctx context.Context, sha256 string, released bool, remove func() error) (bool, error)
	DropOrphan(ctx context.Context, sha256 string, remove func() error) (bool, error)
	ExpireUploads(ctx context.Context, before int64) (int64, error)

	// Cron jobs.
	CronJobs(ctx context.Context) ([]store.CronJob, error)
	CronJob(ctx context.Context, id string) (store.CronJob, error)
	PutCronJob(ctx context.Context, j store.CronJob) error
	FireCronJob(ctx context.Context, id string, wasNext, lastRun, nextRun time.Time, enabled bool) (bool, error)
	SetCronState(ctx context.Context, id string, enabled bool, nextRun time.Time) error
	SetCronErr(ctx context.Context, id, lastErr string) error
	PauseCronJob(ctx context.Context, id string) error
	DeleteCronJob(ctx context.Context, id string) error
}

// Residue lets the suite look behind the interface: how many rows of each
// table still name a message. Some rows are written and never read back
// (read receipts), so only this shows that a delete took them. A store's
// harness should implement it; without it the suite says so and leaves
// those checks out.
type Residue interface {
	Residue(ctx context.Context, messageID string) (map[string]int, error)
}

// Corrupter lets the suite damage what a store holds, as a bad disk or a
// hand edit would: CorruptEvent makes the outbox frame at cursor one that
// does not decode. Without it the suite leaves those checks out.
type Corrupter interface {
	CorruptEvent(ctx context.Context, cursor int64) error
}

// Run runs the contract against stores made by open, a fresh empty one
// for each test.
func Run(t *testing.T, open func(t *testing.T) Store) {
	for _, c := range contract {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

type test struct {
	name string
	fn   func(t *testing.T, s Store)
}

// contract is every test, grouped as Store's methods are.
var contract = concat(outboxTests, historyTests, searchTests, agentTests, deviceTests, pushTests, claimTests, tokenTests, mediaTests, cronTests)

func concat(groups ...[]test) []test {
	var out []test
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

var bg = context.Background()

// write runs fn in one transaction and fails the test when it fails.
func write(t *testing.T, s Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.Write(bg, fn); err != nil {
		t.Fatal(err)
	}
}

// appendEvent commits one durable event and returns its cursor.
func appendEvent(t *testing.T, s Store, ev *core.Event) int64 {
	t.Helper()
	var c int64
	write(t, s, func(tx store.Tx) error {
		var err error
		c, _, err = tx.AppendEvent(ev)
		return err
	})
	return c
}

func idle(ts int64) *core.Event {
	return &core.Event{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: core.DefaultChatID}, TS: ts}
}

func msgEvent(lane core.Lane, id string) *core.Event {
	return &core.Event{Type: core.EvMessage, Lane: lane, TS: 1, Message: &core.Message{ID: id, Lane: lane, Role: core.RoleUser, TS: 1}}
}

func userMsg(lane core.Lane, id, text string, ts int64) core.Message {
	return core.Message{ID: id, Lane: lane, Role: core.RoleUser, Text: text, TS: ts}
}

// cursors lists every cursor the outbox holds.
func cursors(t *testing.T, s Store) []int64 {
	t.Helper()
	head, err := s.OutboxHead(bg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := s.OutboxCursors(bg, 0, head, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func notFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

var errBoom = errors.New("storetest: a write that fails")
