// Package datadir owns the layout and the protection of a gateway's data
// directory: which files in it hold secrets (and are kept 0600 in a 0700
// directory, whoever made the directory), and the lock that lets one
// process at a time serve it.
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Files of a data directory.
const (
	DBFile     = "irisgate.db"   // the SQLite database
	LockFile   = "irisgate.lock" // held by the process using the directory
	SocketFile = "admin.sock"    // the running gateway's admin channel
	VAPIDFile  = "vapid.json"    // Web Push keys
	// StoreFile names the PostgreSQL database of a gateway whose state is
	// there (store.go); without it the state is DBFile's.
	StoreFile = "irisgate.store"
)

// secretFiles hold tokens' hashes, messages, keys or admin access. SQLite
// makes its -wal, -shm and -journal files with the database's own mode,
// so a 0600 database keeps them 0600 too; they are listed for the ones an
// older version left behind.
var secretFiles = []string{DBFile, DBFile + "-wal", DBFile + "-shm", DBFile + "-journal", VAPIDFile, LockFile, SocketFile, StoreFile}

// ErrMissing is returned by Prepare for a directory that does not exist
// when it was not asked to make one.
var ErrMissing = errors.New("no such data directory")

// Prepare makes sure dir is a data directory only its owner can read: the
// directory 0700 (made when create is true) and every secret file in it
// 0600, however they came to be (a directory made by hand with 0755, a
// database an older version made 0644). The database file is made here,
// empty and 0600, when missing, so SQLite never creates it with the
// process's umask. It returns what it had to tighten, for the log.
func Prepare(dir string, create bool) (tightened []string, err error) {
	return prepare(dir, create, true)
}

// PrepareFiles is Prepare for a gateway whose state is not in the SQLite
// file (PostgreSQL): the same protection, and no database file made.
func PrepareFiles(dir string, create bool) (tightened []string, err error) {
	return prepare(dir, create, false)
}

func prepare(dir string, create, sqlite bool) (tightened []string, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		fi, err = os.Stat(dir)
		if err != nil {
			return nil, err
		}
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s", ErrMissing, dir)
	case err != nil:
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory %s is readable by others (%v) and cannot be made private: %w", dir, fi.Mode().Perm(), err)
		}
		tightened = append(tightened, dir)
	}
	if sqlite {
		db := filepath.Join(dir, DBFile)
		if f, err := os.OpenFile(db, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close()
		} else if !errors.Is(err, fs.ErrExist) {
			return tightened, fmt.Errorf("database: %w", err)
		}
	}
	for _, name := range secretFiles {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil {
			continue // not there (yet)
		}
		if fi.Mode()&fs.ModeSymlink != 0 || fi.Mode().Perm()&0o077 == 0 {
			continue // a symlink's own mode means nothing; its target is not ours to change
		}
		if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
			return tightened, fmt.Errorf("making %s private: %w", p, err)
		}
		tightened = append(tightened, p)
	}
	return tightened, nil
}

// Exists reports whether dir exists and is a directory.
func Exists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// HasData reports whether dir holds a gateway's database, or names the
// PostgreSQL database that holds its state.
func HasData(dir string) bool {
	for _, name := range []string{DBFile, StoreFile} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}
