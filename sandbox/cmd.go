package sandbox

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// WaitDelay is how long Wait waits, once the command's supervisor has
// gone, for output a process that escaped it still holds open: then the
// pipes are closed and Wait returns (exec.ErrWaitDelay).
const WaitDelay = 2 * time.Second

// Cmd is a command prepared behind the sandbox's walls. Set Stdout and
// Stderr, Start it, Wait for it; Stop ends it with everything it started.
//
// On Linux the process started leads a session of its own (no
// controlling terminal). Behind the Landlock wall and without a wall it is
// the sandbox's supervisor (see supervise_linux.go): the child subreaper
// of everything the command starts, which, when the command's shell
// exits, or Stop is called, or the gateway dies, kills every process left
// and exits with the shell's status. Behind the namespaces wall it is the
// first process of the command's PID namespace, whose end ends them all.
type Cmd struct {
	*exec.Cmd
	// ctl is the gateway's end of the supervisor's control pipe: closing
	// it (Stop, or the gateway's death) tells the supervisor to end
	// everything. ctlChild is the end the supervisor inherits.
	ctl, ctlChild *os.File
	closeOnce     sync.Once
}

func newCmd(c *exec.Cmd) *Cmd {
	c.WaitDelay = WaitDelay
	return &Cmd{Cmd: c}
}

// withControl gives the command a control pipe, as its fd 3.
func (c *Cmd) withControl() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	c.ctl, c.ctlChild = w, r
	c.ExtraFiles = []*os.File{r}
	return nil
}

// Start starts the command.
func (c *Cmd) Start() error {
	err := c.Cmd.Start()
	if c.ctlChild != nil {
		c.ctlChild.Close() // the supervisor has its copy
	}
	if err != nil {
		c.closeCtl()
	}
	return err
}

// Wait waits for the command (its supervisor, which outlives every
// process the command started) and its output.
func (c *Cmd) Wait() error {
	err := c.Cmd.Wait()
	c.closeCtl()
	return err
}

// Stop tells the supervisor to kill everything the command started and
// exit; Wait then returns. Without a supervisor (the namespaces wall, not
// Linux) it kills the command's process group, which behind the
// namespaces wall ends its PID namespace.
func (c *Cmd) Stop() {
	if c.ctl != nil {
		c.closeCtl()
		return
	}
	c.Kill()
}

// Kill kills the supervisor's (or the command's) process group at once:
// for a supervisor that did not answer Stop.
func (c *Cmd) Kill() {
	if c.Process != nil {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}

func (c *Cmd) closeCtl() {
	c.closeOnce.Do(func() {
		if c.ctl != nil {
			c.ctl.Close()
		}
	})
}
