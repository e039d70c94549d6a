// Package media keeps the gateway's files: a content-addressed store under
// the data directory (one file per sha256, shared by every message that
// carries the same bytes), the assembly of uploads as their bytes arrive,
// and the sweeping of what nothing uses any more.
//
// The database (package store) says which files exist and counts who uses
// them; this package keeps the disk in step. A file is claimed in the
// database, then put in place, before the row that names it commits, and
// removed only inside the transaction that deletes its row, so a row never
// names a missing file, even when replicas share the directory (see
// Index); a crash in between leaves at most a row and a file nothing uses,
// which a sweep removes once the claim has grown stale.
package media

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
)

// Limits bound what devices may store.
type Limits struct {
	// MaxSize bounds one file, either direction.
	MaxSize int64
	// MaxPending is how many unfinished uploads a device may have at once.
	MaxPending int
	// MaxPendingBytes bounds the declared sizes of a device's unfinished
	// uploads together.
	MaxPendingBytes int64
	// The devices of one token together may hold TokenDevices times a
	// device's limits: a device id is the client's to choose, so without
	// it a new id would buy a new allowance.
	TokenDevices int
	// RefTTL is how long an acknowledged upload waits for a message.send
	// to attach it before it is forgotten.
	RefTTL time.Duration
	// SweepEvery is how often expired uploads and unused files are swept.
	SweepEvery time.Duration
}

// Defaults.
const (
	DefaultMaxSize    = 64 << 20
	DefaultMaxPending = 8
	// DefaultTokenDevices: a phone, a tablet, a laptop and a browser may
	// upload at once with one token.
	DefaultTokenDevices = 4
	DefaultRefTTL       = 24 * time.Hour
)

func (l *Limits) defaults() {
	if l.MaxSize <= 0 {
		l.MaxSize = DefaultMaxSize
	}
	if l.MaxPending <= 0 {
		l.MaxPending = DefaultMaxPending
	}
	if l.MaxPendingBytes <= 0 {
		// Room for a few files at the limit, not for MaxPending of them:
		// partial files are disk a device holds without having sent them.
		l.MaxPendingBytes = 4 * l.MaxSize
	}
	if l.TokenDevices <= 0 {
		l.TokenDevices = DefaultTokenDevices
	}
	if l.RefTTL <= 0 {
		l.RefTTL = DefaultRefTTL
	}
	if l.SweepEvery <= 0 {
		l.SweepEvery = min(10*time.Minute, l.RefTTL/4)
	}
}

// Store is the content store of one data directory.
type Store struct {
	dir string // files live in dir/ab/cd/<sha256>
	tmp string // uploads in progress
	st  Index
	lim Limits
	log *slog.Logger

	// fmu orders the file operations of installs and collection, and
	// installing counts this process's installs of each sha256 whose row
	// has not committed yet: their file must stay even though no row names
	// it. (The database's claims say the same across replicas.)
	fmu        sync.Mutex
	installing map[string]int
	swept      bool // orphans of a crash have been looked for

	mu    sync.Mutex
	conns map[uint64]*connUploads
	devs  map[string]*devUploads
	toks  map[string]*devUploads // the same, by token
}

// Open opens the content store in dir, creating it. Uploads a previous run
// left unfinished are removed: their devices are gone.
func Open(dir string, st Index, lim Limits, log *slog.Logger) (*Store, error) {
	lim.defaults()
	if log == nil {
		log = slog.Default()
	}
	s := &Store{dir: dir, tmp: filepath.Join(dir, "tmp"), st: st, lim: lim, log: log,
		installing: map[string]int{}, conns: map[uint64]*connUploads{}, devs: map[string]*devUploads{}, toks: map[string]*devUploads{}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(s.tmp); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.tmp, 0o700); err != nil {
		return nil, err
	}
	return s, nil
}

// Limits returns the limits in force.
func (s *Store) Limits() Limits { return s.lim }

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path is where the file with this sha256 lives (it may not exist).
func (s *Store) Path(sha string) string {
	if len(sha) < 4 {
		return filepath.Join(s.dir, "_", sha)
	}
	return filepath.Join(s.dir, sha[:2], sha[2:4], sha)
}

// Open opens a stored file for reading: the bytes of m, which the caller
// has looked up. The file stays readable even if it is collected meanwhile.
func (s *Store) Open(m core.Media) (*os.File, error) {
	f, err := os.Open(s.Path(m.SHA256))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrGone.New(m.ID)
	}
	return f, err
}

// temp is a file being written, hashed as it grows.
type temp struct {
	f *os.File
	h hash.Hash
	n int64
}

func (s *Store) newTemp() (*temp, error) {
	f, err := os.CreateTemp(s.tmp, "part-*")
	if err != nil {
		return nil, err
	}
	return &temp{f: f, h: sha256.New()}, nil
}

func (t *temp) Write(p []byte) (int, error) {
	n, err := t.f.Write(p)
	t.h.Write(p[:n])
	t.n += int64(n)
	return n, err
}

func (t *temp) sum() string { return hex.EncodeToString(t.h.Sum(nil)) }

// discard removes the file: nothing of it stays.
func (t *temp) discard() {
	t.f.Close()
	os.Remove(t.f.Name())
}

// install moves a complete temp file into the store under its sha256 and
// runs record, which commits the rows that use it. The file is in place
// before record runs (a device told of the file can fetch it at once); if
// record fails, a file nobody else has meanwhile is removed again.
func (s *Store) install(ctx context.Context, t *temp, record func(sha string) error) error {
	sha, err := s.place(ctx, t)
	if sha == "" {
		return err
	}
	if err == nil {
		err = record(sha)
	}
	s.release(ctx, sha, err != nil)
	return err
}

// place moves a complete temp file into the store under its sha256 and
// counts it as being installed: nothing collects it, though no row names
// it yet, until release. sha is empty when the file never got that far
// (nothing to release); otherwise release must follow, err or not.
func (s *Store) place(ctx context.Context, t *temp) (sha string, err error) {
	sha = t.sum()
	// Durable before anyone is told: the ack or offer must not outlive
	// the bytes in a crash.
	err = t.f.Sync()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(t.f.Name())
		return "", err
	}
	final := s.Path(sha)
	s.fmu.Lock()
	s.installing[sha]++
	s.fmu.Unlock()
	// Claimed before the file is looked for: a replica removing the same
	// file has finished (the claim waited for its transaction) and the
	// Stat below sees it gone, or it has not begun and now will not.
	if err := s.st.ClaimBlob(context.WithoutCancel(ctx), sha, t.n); err != nil {
		os.Remove(t.f.Name())
		s.fmu.Lock()
		s.unclaimLocked(sha)
		s.fmu.Unlock()
		return "", err
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if _, serr := os.Stat(final); serr == nil {
		os.Remove(t.f.Name()) // the same bytes are stored already
		return sha, nil
	}
	err = os.MkdirAll(filepath.Dir(final), 0o700)
	if err == nil {
		err = os.Rename(t.f.Name(), final)
	}
	if err == nil {
		err = syncDir(filepath.Dir(final))
	}
	if err != nil {
		os.Remove(t.f.Name())
	}
	return sha, err
}

// release ends an install begun by place, releasing its claim. When it
// failed (the rows that would name the file were not committed), a file no
// row uses and no other install claims is removed at once rather than left
// for the sweep.
func (s *Store) release(ctx context.Context, sha string, failed bool) {
	ctx = context.WithoutCancel(ctx)
	s.fmu.Lock()
	defer s.fmu.Unlock()
	var remove func() error
	if !s.unclaimLocked(sha) && failed {
		remove = func() error { return s.remove(sha) }
	}
	if _, err := s.st.DropBlob(ctx, sha, true, remove); err != nil {
		// The claim stays until it is stale; the sweep then decides.
		s.log.Warn("media: releasing a file's claim", "sha256", sha, "err", err)
	}
}

// unclaimLocked ends one of this process's installs of sha and reports
// whether others are still under way. fmu is held.
func (s *Store) unclaimLocked(sha string) bool {
	if s.installing[sha]--; s.installing[sha] > 0 {
		return true
	}
	delete(s.installing, sha)
	return false
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// remove deletes a file and the directories it leaves empty. fmu is held.
// It runs inside the transaction that deletes the file's row: an error
// keeps the row.
func (s *Store) remove(sha string) error {
	p := s.Path(sha)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("media: removing a file", "path", p, "err", err)
		return err
	}
	for d := filepath.Dir(p); d != s.dir && len(d) > len(s.dir); d = filepath.Dir(d) {
		if os.Remove(d) != nil { // not empty
			break
		}
	}
	return nil
}

// Collect removes the files that no message and no upload uses any more
// and returns how many it removed. The gateway calls it after deleting
// messages; the sweep calls it too.
func (s *Store) Collect(ctx context.Context) (int, error) {
	const batch = 256
	removed := 0
	for {
		shas, err := s.st.UnusedBlobs(ctx, batch)
		if err != nil || len(shas) == 0 {
			return removed, err
		}
		progress := 0
		s.fmu.Lock()
		for _, sha := range shas {
			if s.installing[sha] > 0 {
				continue // an install is about to count it again
			}
			gone, err := s.st.DropBlob(ctx, sha, false, func() error { return s.remove(sha) })
			if err != nil {
				s.fmu.Unlock()
				return removed, err
			}
			progress++
			if gone {
				removed++
			}
		}
		s.fmu.Unlock()
		if len(shas) < batch || progress == 0 {
			return removed, nil
		}
	}
}

// Sweep forgets acknowledged uploads older than RefTTL and collects unused
// files. The first sweep of a run also removes files a crash left without
// a row.
func (s *Store) Sweep(ctx context.Context, now time.Time) error {
	n, err := s.st.ExpireUploads(ctx, now.Add(-s.lim.RefTTL).UnixMilli())
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.Info("media: unused uploads expired", "uploads", n)
	}
	if _, err := s.Collect(ctx); err != nil {
		return err
	}
	s.fmu.Lock()
	first := !s.swept
	s.swept = true
	s.fmu.Unlock()
	if first {
		return s.removeOrphans(ctx)
	}
	return nil
}

// removeOrphans removes stored files that no row names (left by a crash of
// a version that put files in place before claiming them, or put there by
// hand). A file being installed, here or on another replica, is claimed
// and so has a row.
func (s *Store) removeOrphans(ctx context.Context) error {
	return filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == s.tmp {
				return filepath.SkipDir
			}
			return nil
		}
		sha := d.Name()
		if !isSHA256(sha) || s.Path(sha) != p {
			return nil // not ours
		}
		s.fmu.Lock()
		defer s.fmu.Unlock()
		if s.installing[sha] > 0 {
			return nil
		}
		_, err = s.st.DropOrphan(ctx, sha, func() error {
			s.log.Warn("media: removing a file no row names (left by a crash)", "sha256", sha)
			return s.remove(sha)
		})
		return err
	})
}

// Run sweeps now and every SweepEvery until ctx ends.
func (s *Store) Run(ctx context.Context) {
	t := time.NewTicker(s.lim.SweepEvery)
	defer t.Stop()
	for {
		if err := s.Sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("media: sweep", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
