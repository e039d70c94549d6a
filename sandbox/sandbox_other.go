//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"
)

type spec struct {
	Work    string
	Args    []string
	Network bool
}

func settle(*Sandbox, Wall) (Wall, int, string) {
	return None, 0, "no sandbox is written for " + runtime.GOOS + " (Linux only)"
}

// helper runs bash without walls, in a session of its own (no controlling
// terminal). There is no supervisor here: Stop kills the command's
// process group, and what left it lives on.
func (s *Sandbox) helper(w Wall, sp spec) (*Cmd, error) {
	if w != None {
		return nil, errors.New("no sandbox on " + runtime.GOOS)
	}
	bash, err := s.bashPath()
	if err != nil {
		return nil, err
	}
	c := exec.Command(bash, sp.Args[1:]...)
	c.Dir, c.Env = sp.Work, s.Env()
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return newCmd(c), nil
}
