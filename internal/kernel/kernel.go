// Package kernel tells tests what this kernel offers the sandbox, by
// asking the kernel directly rather than the sandbox package: a test that
// needs a wall skips only where the kernel truly lacks it, and fails where
// the kernel has it but the sandbox settled for less (CI=1 or not).
package kernel

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/irisgate/irisgate/sandbox"
)

// signalABI is the first Landlock ABI that scopes signals.
const signalABI = 6

// Lacks says why the kernel cannot hold wall w, or "" when it can.
func Lacks(w sandbox.Wall) string {
	if w == sandbox.None {
		return ""
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		return "the sandbox is written for Linux on amd64 and arm64, this is " + runtime.GOOS + "/" + runtime.GOARCH
	}
	abi := landlockABI()
	if abi < 1 {
		return "this kernel has no Landlock"
	}
	// The Landlock wall alone needs the ABI that scopes signals (the
	// sandbox's minSignalABI); behind namespaces a PID namespace does it.
	if w == sandbox.Landlock && abi < signalABI {
		return fmt.Sprintf("this kernel's Landlock ABI %d cannot keep a command's signals in (ABI %d, Linux 6.12, can)", abi, signalABI)
	}
	if w == sandbox.Namespaces {
		if err := namespaces(); err != nil {
			return "this kernel refuses user namespaces: " + err.Error()
		}
	}
	return ""
}

// Require skips t where the kernel lacks want, and fails it where the
// kernel offers want but got (what the sandbox settled on) is weaker.
func Require(t testing.TB, got, want sandbox.Wall) {
	t.Helper()
	if why := Lacks(want); why != "" {
		t.Skipf("needs the %s wall, and %s", want, why)
	}
	if got < want {
		t.Fatalf("the kernel offers the %s wall but the sandbox settled on %s: a regression", want, got)
	}
}
