package kernel

import (
	"fmt"
	"os/exec"
	"syscall"
)

// landlockABI asks landlock_create_ruleset for its version (444 on amd64
// and arm64).
func landlockABI() int {
	const sysLandlockCreateRuleset, versionFlag = 444, 1
	v, _, e := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, versionFlag)
	if e != 0 {
		return 0
	}
	return int(v)
}

// namespaces starts /bin/true in new user, mount, PID and network
// namespaces, as the sandbox's helper is started.
func namespaces() error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: syscall.Getuid(), HostID: syscall.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: syscall.Getgid(), HostID: syscall.Getgid(), Size: 1}},
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("clone: %w", err)
	}
	return nil
}
