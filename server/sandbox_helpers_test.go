package server_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/irisgate/irisgate/sandbox"
	"github.com/irisgate/irisgate/server"
)

// agSandbox is the sandbox the gateway's tools get in production (the
// data directory hidden but its media), with a temp directory of the
// test's own. IRISGATE_TEST_SANDBOX=landlock|off runs the suite behind a
// weaker wall.
func agSandbox(t testing.TB, work, data string) *sandbox.Sandbox {
	t.Helper()
	want, err := sandbox.ParseWall(os.Getenv("IRISGATE_TEST_SANDBOX"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{
		Temp: filepath.Join(t.TempDir(), "tmp"), Want: want,
		Hide: []string{data}, Expose: []string{filepath.Join(data, server.MediaDir)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}
