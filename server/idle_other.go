//go:build !unix

package server

// canWait: no waiting on a socket apart from a read here; reads block.
const canWait = false

func (r *sockReader) readNow(fd uintptr) bool  { return true }
func (r *sockReader) readable(fd uintptr) bool { return true }
