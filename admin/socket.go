package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/irisgate/irisgate/internal/datadir"
)

// SocketPath is the admin socket of the gateway serving dataDir.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, datadir.SocketFile) }

// maxSunPath is the room for a socket's path in sockaddr_un, less its
// terminating NUL (104 bytes on the BSDs, 108 on Linux).
const maxSunPath = 103

// Listen opens the admin socket in dataDir, readable and writable by its
// owner only (0600, in a directory that is 0700 already: nobody else can
// even reach it while it is being made). A socket left by a gateway that
// crashed is replaced; the caller holds the directory's lock, so no live
// gateway can own it. Connections from another user are refused on
// accept where the system tells who connected (Linux: SO_PEERCRED).
func Listen(dataDir string) (net.Listener, error) {
	p := SocketPath(dataDir)
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	var ln *net.UnixListener
	err := viaShortPath(p, func(addr string) error {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		ln = l
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", p, err)
	}
	ln.SetUnlinkOnClose(false) // its name may be a /proc path by then; removed by name below
	if err := os.Chmod(p, 0o600); err != nil {
		ln.Close()
		os.Remove(p)
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return &listener{UnixListener: ln, path: p}, nil
}

type listener struct {
	*net.UnixListener
	path string
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.UnixListener.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if err := checkPeer(c); err != nil {
			c.Close()
			continue
		}
		return c, nil
	}
}

func (l *listener) Close() error {
	err := l.UnixListener.Close()
	os.Remove(l.path)
	return err
}

// dial connects to the admin socket at path.
func dial(ctx context.Context, path string) (net.Conn, error) {
	var c net.Conn
	err := viaShortPath(path, func(addr string) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "unix", addr)
		return err
	})
	return c, err
}

// viaShortPath runs fn with a name for path that fits a socket address:
// path itself, or, when path is too long (a deep data directory), the
// same file reached through the open directory's /proc/self/fd entry.
func viaShortPath(path string, fn func(addr string) error) error {
	if len(path) <= maxSunPath {
		return fn(path)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	short := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path))
	if len(short) > maxSunPath {
		return fmt.Errorf("the socket's path is longer than %d bytes", maxSunPath)
	}
	if _, err := os.Stat(filepath.Dir(short)); err != nil {
		return fmt.Errorf("the socket's path is longer than %d bytes: use a shorter data directory", maxSunPath)
	}
	return fn(short)
}

// unreachable reports whether err says nobody listens on a socket (a
// gateway that is not running, or one that crashed and left its socket).
func unreachable(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT)
}
