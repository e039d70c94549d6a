package server_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// A read receipt is stored only for a message of its lane: any other id
// is answered not_found (with the request's id), an overlong one
// unsupported, and nothing is stored or told to the other devices.
// (Before, any message_id was stored, of any length.)
func TestReadReceiptNeedsAMessageOfTheLane(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	other := createChannel(t, a, "other", "")
	msg := send(t, a, client.Lane{ChatID: other.ChatID}, "elsewhere")
	a.Expect("agent.idle", nil)
	for _, tc := range []struct {
		id, code string
	}{
		{"m_never_sent", "not_found"},
		{msg, "not_found"}, // a message of another lane
		{strings.Repeat("x", 100_000), "unsupported"},
	} {
		_, err := a.Do("read.receipt", def, map[string]any{"message_id": tc.id})
		wantCode(t, err, tc.code)
	}
	none(t, "tablet", barrier(t, b), func(f client.Frame) bool { return f.Type == "read.receipt" })
	db, err := sql.Open("sqlite", "file:"+filepath.Join(g.Dir, server.DBFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM reads`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d receipts stored (%v), want none", n, err)
	}
	// The message in its own lane is read as before.
	if f := a.MustDo("read.receipt", client.Lane{ChatID: other.ChatID}, map[string]any{"message_id": msg}); f.Type != "read.receipt" {
		t.Fatalf("answered %s", f.Raw)
	}
}
