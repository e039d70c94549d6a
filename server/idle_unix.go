//go:build unix

package server

import "syscall"

// canWait: sockets can be waited on apart from a read here.
const canWait = true

// readNow is a read that does not wait: again when nothing has arrived.
func (r *sockReader) readNow(fd uintptr) bool {
	for {
		n, err := syscall.Read(int(fd), r.p)
		if err == syscall.EINTR {
			continue
		}
		r.n, r.again, r.err = max(n, 0), err == syscall.EAGAIN, nil
		if err != nil && !r.again {
			r.err = err
		}
		return true
	}
}

// readable is true once a read would not wait (a byte, the end, or an
// error to report); false has the poller wait for the socket.
func (r *sockReader) readable(fd uintptr) bool {
	for {
		_, _, err := syscall.Recvfrom(int(fd), r.peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err == syscall.EINTR {
			continue
		}
		return err != syscall.EAGAIN
	}
}
