package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/irisgate/irisgate/core"
)

// crashChildEnv makes the test binary the child of TestIndexCatchesUpAfterKill:
// it commits to the database it names and waits to be killed.
const crashChildEnv = "IRISGATE_STORE_CRASH_CHILD"

// TestMain runs the crash child when asked, and otherwise fails the
// package when a test leaves goroutines behind (the indexer's included).
func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		if err := crashChild(path); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(2)
		}
		// Killed here; or, should the test die first, gone with it.
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// crashChild commits, in this order: three sends and a reply beginning,
// indexed (a catch-up); then, left unindexed (the indexer waits an hour),
// two more sends, the reply finishing, an indexed send replaced, an
// indexed send deleted and an unindexed one deleted. It says "committed"
// when all of it is.
func crashChild(path string) error {
	s, err := Open(path, withIndexDelay(time.Hour))
	if err != nil {
		return err
	}
	ctx := context.Background()
	lane := core.Lane{ChatID: core.DefaultChatID}
	msg := func(id, text string) core.Message {
		return core.Message{ID: id, Lane: lane, Role: core.RoleUser, Text: text, TS: 1}
	}
	for _, fn := range []func(Tx) error{
		func(tx Tx) error { return tx.InsertMessage(msg("m1", "alpha one"), false) },
		func(tx Tx) error { return tx.InsertMessage(msg("m2", "bravo two"), false) },
		func(tx Tx) error { return tx.InsertMessage(msg("m3", "charlie three"), false) },
		func(tx Tx) error {
			return tx.InsertMessage(core.Message{ID: "r1", Lane: lane, Role: core.RoleAssistant, TS: 2}, true)
		},
	} {
		if err := s.Write(ctx, fn); err != nil {
			return err
		}
	}
	if _, err := s.catchUp(ctx); err != nil {
		return err
	}
	for _, fn := range []func(Tx) error{
		func(tx Tx) error { return tx.InsertMessage(msg("m4", "delta four"), false) },
		func(tx Tx) error { return tx.InsertMessage(msg("m5", "echo five"), false) },
		func(tx Tx) error { return tx.SaveProgress("r1", "foxtrot so far", "") },
		func(tx Tx) error {
			return tx.FinishMessage(core.Message{ID: "r1", Lane: lane, Role: core.RoleAssistant, Text: "foxtrot reply", TS: 2})
		},
		func(tx Tx) error { return tx.FinishMessage(msg("m2", "golf replaced")) },
		func(tx Tx) error { return tx.DeleteMessages(lane, []string{"m1", "m5"}) },
	} {
		if err := s.Write(ctx, fn); err != nil {
			return err
		}
	}
	fmt.Println("committed")
	return nil
}

// A gateway killed (SIGKILL) after its commits and before its indexer took
// them in loses no index entry: the next Open indexes what was committed
// and not yet indexed, and deletes and replacements made meanwhile hold.
func TestIndexCatchesUpAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe() // held open: the child waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		said <- strings.TrimSpace(line)
	}()
	select {
	case line := <-said:
		if line != "committed" {
			t.Fatalf("the child said %q; stderr: %s", line, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the child did not commit; stderr: %s", stderr.String())
	}

	// Before the kill, as another process sees the file: committed, not
	// indexed.
	peek := rawOpen(t, path)
	for _, w := range []string{"delta", "foxtrot", "golf"} {
		if got := indexed(t, peek, w); len(got) != 0 {
			t.Fatalf("%q was indexed before the kill (%v): the test would prove nothing", w, got)
		}
	}
	if got := indexed(t, peek, "charlie"); len(got) != 1 {
		t.Fatalf("the first catch-up did not index charlie: %v", got)
	}
	peek.Close()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the child exited by itself")
	}

	var log bytes.Buffer
	s, err := Open(path, WithLog(slog.New(slog.NewTextHandler(&log, nil))), withIndexDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Read from the index itself, before any search could catch it up.
	want := map[string]string{"alpha": "", "bravo": "", "echo": "", "so": "", "charlie": "m3", "delta": "m4", "foxtrot": "r1", "golf": "m2"}
	for w, id := range want {
		got := indexed(t, s, w)
		switch {
		case id == "" && len(got) != 0:
			t.Errorf("%q is in the index after the restart: %v", w, got)
		case id != "" && (len(got) != 1 || got[0] != seqOf(t, s, id)):
			t.Errorf("%q is indexed as %v after the restart, want %s's seq", w, got, id)
		}
	}
	if !strings.Contains(log.String(), "messages=3") {
		t.Errorf("Open did not say it indexed the 3 messages left behind: %s", log.String())
	}
	integrity(t, s, true)
	for w, id := range want {
		if hs, err := s.Search(context.Background(), w, nil, 10); err != nil || hitIDs(hs) != id {
			t.Errorf("search %q after the restart: %q, %v; want %q", w, hitIDs(hs), err, id)
		}
	}
}
