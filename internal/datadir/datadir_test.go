package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPrepareMakesSecretsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if _, err := Prepare(dir, false); !errors.Is(err, ErrMissing) {
		t.Fatalf("a missing directory without create: %v", err)
	}
	if _, err := Prepare(dir, true); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, DBFile)); fi == nil || fi.Mode().Perm() != 0o600 || fi.Size() != 0 {
		t.Fatalf("the database made: %v", fi)
	}
	os.Chmod(dir, 0o755)
	os.WriteFile(filepath.Join(dir, VAPIDFile), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644) // not ours to judge
	os.Symlink("/etc/hostname", filepath.Join(dir, DBFile+"-wal"))
	got, err := Prepare(dir, false)
	if err != nil || len(got) != 2 {
		t.Fatalf("tightened %v, %v", got, err)
	}
	for name, want := range map[string]os.FileMode{".": 0o700, VAPIDFile: 0o600, "notes.txt": 0o644} {
		if fi, _ := os.Stat(filepath.Join(dir, name)); fi.Mode().Perm() != want {
			t.Errorf("%s is %v, want %v", name, fi.Mode().Perm(), want)
		}
	}
}

func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, RoleServe, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h, held := Held(dir); !held || h.Role != RoleServe || h.PID != os.Getpid() {
		t.Fatalf("Held = %+v, %v", h, held)
	}
	start := time.Now()
	_, err = Acquire(dir, RoleCLI, 5*time.Second)
	var inUse *InUseError
	if !errors.As(err, &inUse) || inUse.Role != RoleServe {
		t.Fatalf("a second lock: %v", err)
	}
	if time.Since(start) > 4*time.Second {
		t.Fatal("a live gateway's lock was waited for")
	}
	l.Release()
	if _, held := Held(dir); held {
		t.Fatal("held after release")
	}
	// A command's lock is waited for.
	c, _ := Acquire(dir, RoleCLI, 0)
	go func() { time.Sleep(50 * time.Millisecond); c.Release() }()
	l2, err := Acquire(dir, RoleServe, 5*time.Second)
	if err != nil {
		t.Fatalf("after a command's lock: %v", err)
	}
	l2.Release()
}
