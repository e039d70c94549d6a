package media

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

func setup(t *testing.T, lim Limits) (*Store, *store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ms, err := Open(filepath.Join(dir, "media"), st, lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ms, st, filepath.Join(dir, "media")
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	return out
}

func hexsum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// put uploads data as ref of device dev over connection conn.
func put(t *testing.T, ms *Store, conn uint64, dev, ref string, data []byte) core.Media {
	t.Helper()
	size := int64(len(data))
	if err := ms.Start(conn, dev, "tok", 1, ref, "", "", ref+".txt", &size); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Write(conn, data); err != nil {
		t.Fatal(err)
	}
	got, err := ms.End(context.Background(), conn, dev, ref, hexsum(data))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestSharedBytesAndExpiry(t *testing.T) {
	ms, st, dir := setup(t, Limits{})
	ctx := context.Background()
	data := []byte("the same bytes")
	m := put(t, ms, 1, "phone", "a", data)
	put(t, ms, 1, "phone", "b", data)
	if m.Kind != "document" || m.Mime != "text/plain" || m.SHA256 != hexsum(data) {
		t.Fatalf("stored %+v", m)
	}
	if got := files(t, dir); len(got) != 1 || !strings.HasSuffix(got[0], filepath.Join(m.SHA256[:2], m.SHA256[2:4], m.SHA256)) {
		t.Fatalf("files %v: want one, content-addressed", got)
	}
	// "a" becomes an attachment; "b" expires.
	lane := core.Lane{ChatID: "default"}
	err := st.Write(ctx, func(tx store.Tx) error {
		if err := tx.InsertMessage(core.Message{ID: "m1", Lane: lane, Role: core.RoleUser, TS: 1}, false); err != nil {
			return err
		}
		_, err := tx.AttachUpload("phone", "a", lane, "m1")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Upload(ctx, "phone", "b"); err != nil {
		t.Fatalf("a fresh upload expired: %v", err)
	}
	if err := ms.Sweep(ctx, time.Now().Add(DefaultRefTTL+time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Upload(ctx, "phone", "b"); err != store.ErrNotFound {
		t.Fatalf("an old unused upload: %v, want it expired", err)
	}
	if got := files(t, dir); len(got) != 1 {
		t.Fatalf("the attached file went with the expired ref: %v", got)
	}
	// The message goes: so does the file, and its directories.
	if err := st.Write(ctx, func(tx store.Tx) error { return tx.DeleteMessages(lane, []string{"m1"}) }); err != nil {
		t.Fatal(err)
	}
	if n, err := ms.Collect(ctx); n != 1 || err != nil {
		t.Fatalf("collected %d, %v", n, err)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("files left: %v", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "tmp" {
		t.Fatalf("directories left: %v", ents)
	}
}

func TestCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mdir := filepath.Join(dir, "media")
	// A partial upload and a file whose row never committed.
	orphan := hexsum([]byte("orphan"))
	os.MkdirAll(filepath.Join(mdir, "tmp"), 0o700)
	os.WriteFile(filepath.Join(mdir, "tmp", "part-1"), []byte("half"), 0o600)
	os.MkdirAll(filepath.Join(mdir, orphan[:2], orphan[2:4]), 0o700)
	os.WriteFile(filepath.Join(mdir, orphan[:2], orphan[2:4], orphan), []byte("orphan"), 0o600)
	os.WriteFile(filepath.Join(mdir, "README"), []byte("not ours"), 0o600)
	ms, err := Open(mdir, st, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := put(t, ms, 1, "phone", "kept", []byte("kept"))
	if err := ms.Sweep(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(files(t, mdir), " ")
	if strings.Contains(got, "part-1") || strings.Contains(got, orphan) || !strings.Contains(got, kept.SHA256) || !strings.Contains(got, "README") {
		t.Fatalf("after the first sweep: %s", got)
	}
}

func TestUploadStates(t *testing.T) {
	ms, _, dir := setup(t, Limits{MaxSize: 100, MaxPending: 2})
	size := int64(10)
	start := func(reqID int64, ref string) error {
		return ms.Start(1, "phone", "tok", reqID, ref, "image", "image/png", "x.png", &size)
	}
	// Starting a ref again starts it over.
	if err := start(1, "r"); err != nil {
		t.Fatal(err)
	}
	ms.Write(1, []byte("12345"))
	if err := start(2, "r"); err != nil {
		t.Fatal(err)
	}
	if n, b := ms.Pending("phone"); n != 1 || b != 10 {
		t.Fatalf("pending %d/%d after a restart", n, b)
	}
	if got := files(t, dir); len(got) != 1 {
		t.Fatalf("the restarted upload's first file stays: %v", got)
	}
	ms.Write(1, []byte("0123456789"))
	if _, err := ms.End(context.Background(), 1, "phone", "r", hexsum([]byte("0123456789"))); err != nil {
		t.Fatal(err)
	}
	// Limits: two at once; a frame past the size fails at once, with the
	// start's id, and nothing stays.
	start(3, "a")
	start(4, "b")
	if err := start(5, "c"); core.AsError(err).Code != core.CodeRateLimited {
		t.Fatalf("a third upload: %v", err)
	}
	// The refused upload's bytes go nowhere: not into b, open before it.
	if id, err := ms.Write(1, make([]byte, 11)); id != 0 || err != nil {
		t.Fatalf("bytes after a refused start: %d %v", id, err)
	}
	start(4, "b") // b again, from its start
	if id, err := ms.Write(1, make([]byte, 11)); id != 4 || core.AsError(err).Code != core.CodeMediaTooLarge {
		t.Fatalf("an overrun: %d %v", id, err)
	}
	if id, err := ms.Write(1, []byte("x")); id != 0 || err != nil {
		t.Fatalf("after the failure frames are dropped quietly: %d %v", id, err)
	}
	if n, _ := ms.Pending("phone"); n != 1 {
		t.Fatalf("pending %d: the failed upload no longer counts", n)
	}
	if _, err := ms.End(context.Background(), 1, "phone", "b", ""); core.AsError(err).Code != core.CodeMediaTooLarge {
		t.Fatalf("the failed upload's end: %v", err)
	}
	big := int64(101)
	if err := ms.Start(1, "phone", "tok", 6, "big", "", "", "", &big); core.AsError(err).Code != core.CodeMediaTooLarge {
		t.Fatalf("a start over the limit: %v", err)
	}
	ms.Drop(1)
	if n, _ := ms.Pending("phone"); n != 0 {
		t.Fatalf("pending %d after the connection ended", n)
	}
	if got := files(t, dir); len(got) != 1 {
		t.Fatalf("files %v: want only the finished upload", got)
	}
}

func TestIngest(t *testing.T) {
	ms, st, _ := setup(t, Limits{MaxSize: 1000})
	ctx := context.Background()
	dir := t.TempDir()
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 100)...)
	os.WriteFile(filepath.Join(dir, "noext"), png, 0o600)
	os.WriteFile(filepath.Join(dir, "big.txt"), make([]byte, 1001), 0o600)
	var recorded core.Media
	m, err := ms.Ingest(ctx, filepath.Join(dir, "noext"), func(m core.Media) error {
		recorded = m
		return st.Write(ctx, func(tx store.Tx) error { return tx.PutBlob(m.SHA256, m.Size) })
	})
	if err != nil || m.Kind != "image" || m.Mime != "image/png" || m.Size != int64(len(png)) || m.SHA256 != hexsum(png) || recorded != m {
		t.Fatalf("ingest: %+v %v", m, err)
	}
	if _, err := ms.Ingest(ctx, filepath.Join(dir, "big.txt"), func(core.Media) error { return nil }); core.AsError(err).Code != core.CodeMediaTooLarge {
		t.Fatalf("a file over the limit: %v", err)
	}
	// A failed record leaves no file behind.
	os.WriteFile(filepath.Join(dir, "other.txt"), []byte("other"), 0o600)
	failed, err := ms.Ingest(ctx, filepath.Join(dir, "other.txt"), func(core.Media) error { return os.ErrPermission })
	if err == nil {
		t.Fatal("the record's error was lost")
	}
	if _, err := os.Stat(ms.Path(failed.SHA256)); err == nil {
		t.Fatal("the file of a failed record stays")
	}
}

func TestDescribe(t *testing.T) {
	size := int64(1)
	for _, c := range []struct {
		ref, kind, mime, name string
		want                  core.Media
	}{
		{"r", "", "", "a.JPG", core.Media{Kind: "image", Mime: "image/jpeg", Filename: "a.JPG", Size: 1}},
		{"r", "voice", "audio/ogg; codecs=opus", "", core.Media{Kind: "voice", Mime: "audio/ogg", Filename: "r", Size: 1}},
		{"r", "", "video/mp4", `C:\Users\me\clip.mp4`, core.Media{Kind: "video", Mime: "video/mp4", Filename: "clip.mp4", Size: 1}},
		{"../..", "", "", "..", core.Media{Kind: "document", Mime: "application/octet-stream", Filename: "file", Size: 1}},
	} {
		got, err := Describe(c.ref, c.kind, c.mime, c.name, &size)
		if err != nil || got != c.want {
			t.Errorf("Describe(%q, %q, %q, %q) = %+v, %v; want %+v", c.ref, c.kind, c.mime, c.name, got, err, c.want)
		}
	}
}
