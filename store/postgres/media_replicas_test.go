package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/media"
)

// holdUpload starts a transaction that inserts, uncommitted, the upload
// row (dev, ref): an install recording that ref waits on it, its file in
// place and its row not yet committed, until the returned func rolls the
// transaction back. It returns once some session waits on the lock.
func holdUpload(t *testing.T, s *Store, dev, ref string, install func()) (resume func()) {
	t.Helper()
	tx, err := s.pool.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(bg, `INSERT INTO uploads (device_id, ref, sha256, kind, mime, size, filename, created) VALUES ($1,$2,'x','document','text/plain',1,'x',0)`, dev, ref); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); install() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := s.pool.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			tx.Rollback(bg)
			<-done
			t.Fatal("the install never waited on the held upload row")
		}
		time.Sleep(5 * time.Millisecond) // a lock wait is PostgreSQL's: no event of ours to wait on
	}
	return func() {
		tx.Rollback(bg)
		<-done
	}
}

// Issue 18: replicas share one database and one media directory. A file
// replica A is installing (in place, its rows not yet committed) is not
// removed by replica B's sweep: neither a new file, which B's first sweep
// would take for a crash's orphan, nor bytes an unused blob row names,
// which B's collection would forget as A reuses them. Before claims, B
// removed both and A's committed rows named a missing file ("the file …
// is gone from the gateway", TestMediaAcrossReplicas about 1 run in 8).
func TestMediaSweepSparesAnotherReplicasInstall(t *testing.T) {
	url, dir := pgtest.DB(t), t.TempDir()
	sa, sb := openURL(t, url), openURL(t, url)
	ma, err := media.Open(dir, sa, media.Limits{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := media.Open(dir, sb, media.Limits{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("replicated bytes "), 1000)
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	put := func(ref string) func() {
		return func() {
			if _, err := ma.Put(bg, "phone", ref, core.Media{Filename: ref + ".txt"}, bytes.NewReader(data)); err != nil {
				t.Errorf("A's put of %s: %v", ref, err)
			}
		}
	}
	intact := func(when string) {
		t.Helper()
		f, err := mb.Open(core.Media{ID: "md_x", SHA256: sha})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer f.Close()
		if got, _ := io.ReadAll(f); !bytes.Equal(got, data) {
			t.Fatalf("%s: the file holds %d bytes", when, len(got))
		}
	}

	// A new file: B's first sweep looks for orphans meanwhile.
	resume := holdUpload(t, sa, "phone", "one", put("one"))
	if _, err := os.Stat(ma.Path(sha)); err != nil {
		resume()
		t.Fatalf("A's file is not in place while its row waits: %v", err)
	}
	err = mb.Sweep(bg, time.Now())
	resume()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Upload(bg, "phone", "one"); err != nil {
		t.Fatalf("A's upload: %v", err)
	}
	intact("after B's first sweep during A's install")

	// The same bytes again, once nothing uses them: B collects meanwhile.
	if _, err := sa.ExpireUploads(bg, time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	resume = holdUpload(t, sa, "phone", "two", put("two"))
	_, err = mb.Collect(bg)
	resume()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Upload(bg, "phone", "two"); err != nil {
		t.Fatalf("A's second upload: %v", err)
	}
	intact("after B's collection during A's reuse")

	// Unused once more: the file goes now that no install holds it.
	if _, err := sa.ExpireUploads(bg, time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if n, err := mb.Collect(bg); n != 1 || err != nil {
		t.Fatalf("B collected %d, %v; want the unused file", n, err)
	}
	if _, err := os.Stat(ma.Path(sha)); !os.IsNotExist(err) {
		t.Fatalf("the unused file stays: %v", err)
	}
}

// A claim keeps a blob from collection for ClaimGrace and no longer: an
// install whose replica crashed leaves a claim nobody releases.
func TestStaleBlobClaim(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	if err := s.ClaimBlob(ctx, "aaaa", 1); err != nil {
		t.Fatal(err)
	}
	removed := 0
	remove := func() error { removed++; return nil }
	if u, _ := s.UnusedBlobs(ctx, 10); len(u) != 0 {
		t.Fatalf("a claimed blob listed unused: %v", u)
	}
	if gone, err := s.DropBlob(ctx, "aaaa", false, remove); gone || err != nil || removed != 0 {
		t.Fatalf("dropped a claimed blob: %v, %v", gone, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE blobs SET claimed = clock_timestamp() - $1 * interval '1 millisecond'`, (ClaimGrace + time.Minute).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	if u, _ := s.UnusedBlobs(ctx, 10); len(u) != 1 {
		t.Fatalf("a stale claim keeps its blob: %v", u)
	}
	if gone, err := s.DropBlob(ctx, "aaaa", false, remove); !gone || err != nil || removed != 1 {
		t.Fatalf("a stale claim's blob: dropped %v, %v, removed %d", gone, err, removed)
	}
	// Released, a claim's blob goes at once; a failing remove keeps the row.
	s.ClaimBlob(ctx, "bbbb", 1)
	s.ClaimBlob(ctx, "bbbb", 1)
	if gone, _ := s.DropBlob(ctx, "bbbb", true, remove); gone {
		t.Fatal("dropped a blob another install claims")
	}
	if gone, err := s.DropBlob(ctx, "bbbb", true, func() error { return os.ErrPermission }); gone || err == nil {
		t.Fatalf("a failing remove: %v, %v", gone, err)
	}
	if has, _ := s.HasBlob(ctx, "bbbb"); !has {
		t.Fatal("the row went with a file that stayed")
	}
	if gone, err := s.DropBlob(ctx, "bbbb", false, remove); !gone || err != nil {
		t.Fatalf("the released blob: %v, %v", gone, err)
	}
}
