package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The registry lets a command find the gateway this user runs when it is
// started somewhere else than the gateway was (no ./irisgate-data there):
// each running `irisgate serve` puts a symlink to its admin socket in a
// directory of the user's own (IRISGATE_RUNTIME_DIR, else
// $XDG_RUNTIME_DIR/irisgate, else /tmp/irisgate-<uid>, always 0700 and
// owned by the user). A link whose socket no longer answers (a crash) is
// skipped and removed.

// RuntimeDirEnv names the registry's directory (tests set it).
const RuntimeDirEnv = "IRISGATE_RUNTIME_DIR"

func registryDir(create bool) (string, error) {
	dir := os.Getenv(RuntimeDirEnv)
	if dir == "" {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			dir = filepath.Join(x, "irisgate")
		} else {
			dir = filepath.Join(os.TempDir(), "irisgate-"+strconv.Itoa(os.Getuid()))
		}
	}
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	// In a shared /tmp another user could have made it first: a
	// directory that is not ours alone is not used.
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || !ownedByMe(fi) {
		return "", fmt.Errorf("%s is not a private directory of this user", dir)
	}
	return dir, nil
}

func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Getuid()
}

func entryName(dataDir string) string {
	h := sha256.Sum256([]byte(dataDir))
	return hex.EncodeToString(h[:8]) + ".sock"
}

// Register announces the gateway serving dataDir to this user's commands; the returned function withdraws it.
func Register(dataDir string) (func(), error) {
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return func() {}, err
	}
	dir, err := registryDir(true)
	if err != nil {
		return func() {}, err
	}
	link := filepath.Join(dir, entryName(dataDir))
	os.Remove(link) // left by a gateway on the same directory that crashed
	if err := os.Symlink(SocketPath(dataDir), link); err != nil {
		return func() {}, err
	}
	return func() { os.Remove(link) }, nil
}

// Running lists the gateways of this user that answer on their admin
// socket.
func Running(ctx context.Context) []Info {
	dir, err := registryDir(false)
	if err != nil {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Info
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sock") {
			continue
		}
		link := filepath.Join(dir, e.Name())
		target, err := os.Readlink(link)
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := connectLive(cctx, filepath.Dir(target))
		cancel()
		if err != nil {
			if unreachable(err) || errors.Is(err, fs.ErrNotExist) {
				os.Remove(link)
			}
			continue
		}
		out = append(out, c.info)
		c.Close()
	}
	return out
}
