//go:build !linux

package admin

import "net"

// checkPeer relies on the socket's mode (0600 in a 0700 directory) where
// the system offers no portable way to ask who connected.
func checkPeer(c *net.UnixConn) error { return nil }
