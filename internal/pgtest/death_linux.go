package pgtest

import (
	"os/exec"
	"syscall"
)

// setParentDeath has the kernel send the child SIGQUIT (PostgreSQL's
// immediate shutdown) when the thread that started it ends.
func setParentDeath(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
}
