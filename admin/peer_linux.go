package admin

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// checkPeer refuses a connection from another user than the gateway's
// (root excepted): the socket's mode says the same, this says it again
// whatever happened to the mode.
func checkPeer(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if uid := uint32(os.Getuid()); cred.Uid != uid && cred.Uid != 0 {
		return fmt.Errorf("admin socket: refused a connection from uid %d", cred.Uid)
	}
	return nil
}
