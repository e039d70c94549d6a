//go:build unix

package server

import "syscall"

// canPeek: a socket can be waited on apart from a read here.
const canPeek = true

// readable is true once a read would not wait (a byte, the end, or an
// error to report); false has the poller wait for the socket. It peeks:
// the byte stays for the read.
func (r *sockReader) readable(fd uintptr) bool {
	for {
		_, _, err := syscall.Recvfrom(int(fd), r.peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err == syscall.EINTR {
			continue
		}
		return err != syscall.EAGAIN
	}
}
