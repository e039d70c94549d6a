package main

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// irisgate runs the command line in this process and returns its exit
// status, standard output and standard error.
func irisgate(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	code := run(args, &cliIO{Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

// noGateways makes the test's commands see no running gateway of this
// user (other tests' and other people's), nor an IRISGATE_DATA.
func noGateways(t *testing.T) {
	reg := t.TempDir()
	os.Chmod(reg, 0o700) // the registry is private or not used
	t.Setenv("IRISGATE_RUNTIME_DIR", reg)
	t.Setenv("IRISGATE_DATA", "")
	os.Unsetenv("IRISGATE_DATA")
}

// TestTokenCommands runs token create, list and revoke on a data
// directory no gateway runs on.
func TestTokenCommands(t *testing.T) {
	noGateways(t)
	dir := filepath.Join(t.TempDir(), "data")
	code, tok, errOut := irisgate(t, "token", "create", "--data", dir, "--name", "phone", "--device", "dev1")
	tok = strings.TrimSpace(tok)
	if code != 0 || !strings.HasPrefix(tok, "igt_") || !strings.Contains(errOut, "no gateway is running there") {
		t.Fatalf("create: %d %q %q", code, tok, errOut)
	}
	st, err := store.Open(filepath.Join(dir, server.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	toks, err := st.Tokens(context.Background())
	st.Close()
	h := sha256.Sum256([]byte(tok))
	if err != nil || len(toks) != 1 || toks[0].Name != "phone" || toks[0].DeviceID != "dev1" || string(toks[0].Hash) != string(h[:]) {
		t.Fatalf("tokens = %+v, %v", toks, err)
	}
	code, list, _ := irisgate(t, "token", "list", "--data", dir)
	if row := lineWith(list, toks[0].ID); code != 0 || !strings.Contains(row, "phone") || !strings.Contains(row, "dev1") || strings.Contains(list, tok) {
		t.Fatalf("list: %d\n%s", code, list)
	}
	// By its value (what create printed), then by id; twice fails.
	if code, _, errOut := irisgate(t, "token", "revoke", tok, "--data", dir); code != 0 || !strings.Contains(errOut, "revoked "+toks[0].ID+" (phone)") {
		t.Fatalf("revoke by value: %d %q", code, errOut)
	}
	_, tok2, _ := irisgate(t, "token", "create", "--data", dir)
	_, list, _ = irisgate(t, "token", "list", "--data", dir)
	id2 := strings.Fields(lineWith(list, "tok_"))[0]
	if code, _, errOut := irisgate(t, "token", "revoke", id2, "--data", dir); code != 0 || !strings.Contains(errOut, "revoked "+id2) {
		t.Fatalf("revoke by id: %d %q", code, errOut)
	}
	for _, ref := range []string{id2, strings.TrimSpace(tok2), "igt_unknown"} {
		code, _, errOut := irisgate(t, "token", "revoke", ref, "--data", dir)
		if code != 1 || (!strings.Contains(errOut, "no token with id") && !strings.Contains(errOut, "revoke by the tok_ id")) {
			t.Fatalf("revoking %s again: %d %q", ref, code, errOut)
		}
	}
	// A bad binding is refused before anything is stored.
	if code, _, errOut := irisgate(t, "token", "create", "--data", dir, "--device", "two words"); code != 1 || !strings.Contains(errOut, "without spaces") {
		t.Fatalf("a device id with a space: %d %q", code, errOut)
	}
}
