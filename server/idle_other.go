//go:build !unix

package server

// canPeek: no waiting on a socket apart from a read here; reads block as
// they always did.
const canPeek = false

func (r *sockReader) readable(fd uintptr) bool { return true }
