//go:build !linux

package pgtest

import "os/exec"

// setParentDeath: only Linux has a parent-death signal; elsewhere a test
// binary that is killed leaves its server running.
func setParentDeath(*exec.Cmd) {}
