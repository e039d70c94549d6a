//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
	"runtime"
)

type spec struct {
	Work    string
	Args    []string
	Network bool
}

func settle(*Sandbox, Wall) (Wall, int, string) {
	return None, 0, "no sandbox is written for " + runtime.GOOS + " (Linux only)"
}

func (s *Sandbox) helper(Wall, spec) (*exec.Cmd, error) {
	return nil, errors.New("no sandbox on " + runtime.GOOS)
}
