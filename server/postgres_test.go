package server_test

// The whole gateway on PostgreSQL (issue 18): the store contract
// (store/storetest) already holds PostgreSQL's store to SQLite's rules one
// method at a time; these run the gateway's own tests on it, end to end,
// through the same code path `irisgate serve --store postgres://…` takes.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/datadir"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store/postgres"
)

// TestOnPostgres runs a representative set of the gateway's tests, each on
// a fresh database: hello, a turn of the echo agent, history, sync after a
// reconnect, search, media, a token revoked through the admin socket, a
// restart that keeps everything, and a cron turn owed across a restart
// run once.
func TestOnPostgres(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, ...func(*server.AppConfig))
	}{
		{"HelloAck", testHelloAck},
		{"HelloAndTurn", testHelloAndTurn},
		{"HistoryPaging", testHistoryPaging},
		{"SyncReplaysWhileAway", testSyncReplaysWhileAway},
		{"Search", testSearch},
		{"UploadRoundTrips", testUploadRoundTrips},
		{"RevokeEndsTheTokensSessions", testRevokeEndsTheTokensSessions},
		{"RestartKeepsEverything", testRestartKeepsEverything},
		{"CronTurnQueuedAtStopRunsOnceAfterRestart", testCronTurnQueuedAtStopRunsOnceAfterRestart},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, testgw.OnPostgres(t)) })
	}
}

func TestRestartKeepsEverything(t *testing.T) { testRestartKeepsEverything(t) }

// testRestartKeepsEverything stops a gateway that has channels, a turn,
// a file, a token made on its admin socket and a device's proofs, and
// starts another on the same data (directory and store): everything is
// there, and a device that was away catches up with the same frames.
func testRestartKeepsEverything(t *testing.T, on ...func(*server.AppConfig)) {
	g := testgw.Start(t, on...)
	ctx := context.Background()
	a := g.Dial(t, "phone")
	notes := createChannel(t, a, "Notes", "")
	nl := client.Lane{ChatID: notes.ChatID}
	file := blob(70_000, 7)
	upload(t, a, "plan", file, 32<<10)
	echo, err := sendWith(t, a, nl, "remember the zanzibar plan", "plan")
	if err != nil {
		t.Fatal(err)
	}
	a.Expect("agent.idle", nil)
	sent := testgw.Str(t, echo, "message_id")
	media := mediaOf(t, echo)
	ac, err := admin.Connect(ctx, admin.Options{DataDir: g.Dir})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ac.CreateToken(ctx, "tablet", "")
	ac.Close()
	if err != nil {
		t.Fatal(err)
	}
	// What a device that was away is replayed, and what the phone that
	// saw it all is (nothing: its proofs of delivery say it has them).
	before, _ := syncAll(t, g.Dial(t, "laptop"), 0)
	if got := syncFrom(t, a, 0); len(got) != 0 || len(before) == 0 {
		t.Fatalf("before the restart the phone is replayed %v, the laptop %v", types(got), types(before))
	}
	before0, _ := history(t, a, nl, nil)
	head := before[len(before)-1].Cursor

	g.Close()
	g = testgw.StartIn(t, g.Dir, on...)
	b, err := g.DialErr(t, "tablet", tok.Value)
	if err != nil {
		t.Fatalf("the admin socket's token after the restart: %v", err)
	}
	w := b.HelloAck()
	if w.SyncCursor != head || len(w.Channels) != 2 {
		t.Fatalf("after the restart: sync_cursor %d (was %d), %d channels", w.SyncCursor, head, len(w.Channels))
	}
	after, _ := syncAll(t, b, 0)
	if !slices.Equal(types(after), types(before)) {
		t.Fatalf("replayed %v after the restart, %v before", types(after), types(before))
	}
	for i := range after {
		if after[i].Cursor != before[i].Cursor || !bytes.Equal(after[i].Payload, before[i].Payload) {
			t.Fatalf("frame %d: %s after the restart, %s before", i, after[i].Raw, before[i].Raw)
		}
	}
	a = g.Dial(t, "phone")
	if got := syncFrom(t, a, 0); len(got) != 0 {
		t.Fatalf("after the restart the phone is replayed %v: its proofs were lost", types(got))
	}
	if h, err := history(t, b, nl, nil); err != nil || !slices.Equal(pageIDs(h), pageIDs(before0)) || len(h.Messages) != 2 {
		t.Fatalf("history after the restart: %v (was %v), %v", pageIDs(h), pageIDs(before0), err)
	}
	if hs, err := search(t, b, map[string]any{"query": "zanzib"}); err != nil || len(hs) != 2 || hs[1].MessageID != sent { // and its echo
		t.Fatalf("search after the restart: %+v %v", hs, err)
	}
	if _, data, err := pull(t, b, media[0].MediaID); err != nil || !bytes.Equal(data, file) {
		t.Fatalf("the file after the restart: %d bytes, %v", len(data), err)
	}
	a.MustDo("message.send", nl, map[string]any{"text": "and after"})
	a.Expect("agent.idle", nil)
}

// Two gateways on one database are refused unless both are replicas
// (AppConfig.Replica): the second one's start says who serves the database and
// what to do, and the first one is unharmed. Once it stops, another data
// directory cannot take its database either without giving up its own.
func TestSecondGatewayOnOneDatabaseRefused(t *testing.T) {
	on := testgw.OnPostgres(t)
	g := testgw.Start(t, on)
	cfg := server.AppConfig{DataDir: t.TempDir(), Token: "x"}
	on(&cfg)
	_, err := server.Open(cfg)
	var served *postgres.ServedError
	if !errors.As(err, &served) || !strings.Contains(served.By, fmt.Sprintf("pid %d", os.Getpid())) ||
		!strings.Contains(err.Error(), "stop the other gateway first, or give this one a database of its own (--store)") {
		t.Fatalf("a second gateway on one database: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, datadir.StoreFile)); !os.IsNotExist(err) {
		t.Fatalf("the refused start bound its directory: %v", err)
	}
	g.Dial(t, "laptop").MustDo("ping", client.Lane{}, nil)

	// A second gateway on the same directory: the lock's message says a
	// database of its own is needed too.
	_, err = server.Open(server.AppConfig{DataDir: g.Dir, Store: cfg.Store, Token: "x"})
	var inUse *datadir.InUseError
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), "another --data and a database of its own (--store)") {
		t.Fatalf("a second gateway on one directory: %v", err)
	}
	g.Close()
	testgw.Start(t, on).Dial(t, "laptop").MustDo("ping", client.Lane{}, nil) // the database is free again
}

// A data directory keeps the store it was served with: its media files go
// with that store's messages. Served on PostgreSQL, it is refused to
// SQLite and to another database; a SQLite directory with data is refused
// to PostgreSQL. Each refusal says what to do.
func TestDataDirKeepsItsStore(t *testing.T) {
	on := testgw.OnPostgres(t)
	g := testgw.Start(t, on)
	g.Dial(t, "phone").MustDo("ping", client.Lane{}, nil)
	g.Close()
	if _, err := server.Open(server.AppConfig{DataDir: g.Dir}); err == nil || !strings.Contains(err.Error(), "keeps its state in PostgreSQL") {
		t.Fatalf("SQLite on a PostgreSQL directory: %v", err)
	}
	if _, err := server.Open(server.AppConfig{DataDir: g.Dir, Store: pgtest.DB(t)}); err == nil || !strings.Contains(err.Error(), "belongs with the database") {
		t.Fatalf("another database: %v", err)
	}
	if _, err := os.Stat(filepath.Join(g.Dir, datadir.DBFile)); !os.IsNotExist(err) {
		t.Fatalf("a SQLite file was made: %v", err)
	}

	sq := testgw.Start(t)
	sq.Dial(t, "phone").MustDo("ping", client.Lane{}, nil)
	sq.Close()
	cfg := server.AppConfig{DataDir: sq.Dir}
	on(&cfg)
	if _, err := server.Open(cfg); err == nil || !strings.Contains(err.Error(), "serve it without --store to keep using it") {
		t.Fatalf("PostgreSQL on a SQLite directory: %v", err)
	}
	testgw.StartIn(t, sq.Dir).Dial(t, "phone").MustDo("ping", client.Lane{}, nil)
}

// The one text PostgreSQL cannot keep that SQLite does: a NUL character.
// The sender is told so (unsupported, the kind's message), not given an
// internal error, and nothing of the message is left; the next one goes
// through.
func TestNULRefusedOnPostgres(t *testing.T) {
	g := testgw.Start(t, testgw.OnPostgres(t))
	a := g.Dial(t, "phone")
	_, err := a.Do("message.send", def, map[string]any{"text": "before\u0000after"})
	wantCode(t, err, "unsupported")
	if !strings.Contains(err.Error(), "NUL character") {
		t.Fatalf("the refusal: %v", err)
	}
	if h, err := history(t, a, def, nil); err != nil || len(h.Messages) != 0 {
		t.Fatalf("history after the refusal: %+v %v", h, err)
	}
	send(t, a, def, "plain text")
	a.Expect("agent.idle", nil)
}

// Replicas need a database they can share: a SQLite file is refused at
// once, before the directory is touched.
func TestReplicaNeedsPostgres(t *testing.T) {
	dir := t.TempDir()
	_, err := server.Open(server.AppConfig{DataDir: dir, Token: "x", Replica: true})
	if err == nil || !strings.Contains(err.Error(), "replicas share a PostgreSQL database") {
		t.Fatalf("a replica on SQLite: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, server.DBFile)); !os.IsNotExist(err) {
		t.Fatalf("the refused replica made a SQLite file: %v", err)
	}
}
