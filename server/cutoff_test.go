package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/store"
)

// A reply's message.start goes out before its row is committed (issue 17:
// first token → device), so a gateway can die with a reply shown streaming
// and never stored. The turn's row names the reply (StartTurn), and the
// next start tells the devices to drop its bubble (message.deleted, which
// a device away gets by sync), says the turn was cut off, and ends the
// lane's busy state; the turn is not run again.
func TestReplyShownButNeverStoredIsDroppedAtRestart(t *testing.T) {
	dir := t.TempDir()
	seedCutOff(t, dir, "m_asked", "m_neverstored", "what is the answer")
	g := testgw.StartIn(t, dir)
	d := g.Dial(t, "phone")
	d.MustDo("sync", client.Lane{}, map[string]any{"cursor": 0})
	// sync.done came after the replay: the frames are read in cursor order.
	d.Expect("message.deleted", func(f client.Frame) bool {
		var p struct {
			IDs []string `json:"message_ids"`
		}
		f.Decode(&p)
		return len(p.IDs) == 1 && p.IDs[0] == "m_neverstored"
	})
	d.Expect("message", func(f client.Frame) bool {
		return testgw.Str(t, f, "role") == "system" && strings.Contains(testgw.Str(t, f, "text"), "cut off before it answered “what is the answer”")
	})
	d.Expect("agent.idle", nil)
	if owed, err := g.SQLite(t).Turns(context.Background()); err != nil || len(owed) != 0 {
		t.Fatalf("turns owed after the restart: %+v (%v)", owed, err)
	}
}

// A reply stored before the crash (left streaming) ends as a stopped
// reply, as before: nothing is dropped and no cut-off note is needed.
func TestReplyStoredBeforeTheCrashEndsStopped(t *testing.T) {
	dir := t.TempDir()
	seedCutOff(t, dir, "m_asked", "m_stored", "what is the answer")
	st, err := store.Open(filepath.Join(dir, "irisgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Write(context.Background(), func(tx store.Tx) error {
		return tx.InsertMessage(core.Message{ID: "m_stored", Lane: core.Lane{ChatID: core.DefaultChatID}, Role: core.RoleAssistant, Text: "forty", TS: 2}, true)
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	g := testgw.StartIn(t, dir)
	d := g.Dial(t, "phone")
	d.MustDo("sync", client.Lane{}, map[string]any{"cursor": 0})
	var kinds []string
	for {
		f := d.Next()
		kinds = append(kinds, f.Type)
		if f.Type == "message.stop" && (testgw.Str(t, f, "message_id") != "m_stored" || testgw.Str(t, f, "final_text") != "forty") {
			t.Fatalf("message.stop %s, want m_stored with its saved text", f.Raw)
		}
		if f.Type == "message.deleted" || (f.Type == "message" && testgw.Str(t, f, "role") == "system") {
			t.Fatalf("a stored reply was dropped or noted as cut off: %s", f.Raw)
		}
		if f.Type == "agent.idle" {
			break
		}
	}
	if !strings.Contains(strings.Join(kinds, " "), "message.stop") {
		t.Fatalf("frames %v: no message.stop", kinds)
	}
}

// seedCutOff makes dir's database as a gateway killed mid-turn leaves it:
// asked was sent and its turn was running, streaming its reply as reply.
func seedCutOff(t *testing.T, dir, asked, reply, text string) {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "irisgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lk := core.Lane{ChatID: core.DefaultChatID}
	if err := st.Write(context.Background(), func(tx store.Tx) error {
		if err := tx.InsertMessage(core.Message{ID: asked, Lane: lk, Role: core.RoleUser, Text: text, TS: 1}, false); err != nil {
			return err
		}
		if err := tx.QueueTurn(lk, asked); err != nil {
			return err
		}
		return tx.StartTurn(asked, reply)
	}); err != nil {
		t.Fatal(err)
	}
}
