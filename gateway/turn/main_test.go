package turn_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: each
// rig shuts its runner and commit log down when its test ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
