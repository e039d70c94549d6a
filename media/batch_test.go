package media

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// TestBatch: files stream into place, stay through sweeps while no row
// names them, and are kept by a commit or removed by an abort; limits
// hold per file and for the batch.
func TestBatch(t *testing.T) {
	ms, st, dir := setup(t, Limits{MaxSize: 1000, MaxPendingBytes: 1500})
	ctx := context.Background()
	a, b := bytes.Repeat([]byte("a"), 1000), []byte("%PDF-1.4 a small document")

	batch := ms.NewBatch()
	ma, err := batch.Add(ctx, "dir/a.txt", "", bytes.NewReader(a))
	if err != nil || ma.Filename != "a.txt" || ma.Mime != "text/plain" || ma.Size != 1000 || ma.SHA256 != hexsum(a) {
		t.Fatalf("add a: %+v %v", ma, err)
	}
	mb, err := batch.Add(ctx, "report", "application/octet-stream", bytes.NewReader(b))
	if err != nil || mb.Mime != "application/pdf" || mb.Kind != "document" {
		t.Fatalf("add b (sniffed): %+v %v", mb, err)
	}
	// Placed but not yet named by a row: a sweep leaves them alone.
	if err := ms.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); len(got) != 2 {
		t.Fatalf("files during the batch: %v", got)
	}
	// The batch together may hold 1500 bytes: a third file passes that.
	if _, err := batch.Add(ctx, "c.bin", "", bytes.NewReader(make([]byte, 600))); core.AsError(err).Code != core.CodeMediaTooLarge ||
		!strings.Contains(err.Error(), "together") {
		t.Fatalf("past the batch's bytes: %v", err)
	}
	err = batch.Commit(ctx, func(fs []core.Media) error {
		if len(fs) != 2 {
			t.Errorf("commit got %d files", len(fs))
		}
		return st.Write(ctx, func(tx store.Tx) error {
			for _, f := range fs {
				if err := tx.PutBlob(f.SHA256, f.Size); err != nil {
					return err
				}
			}
			return tx.PutUpload("dev", "keep", fs[0]) // a row naming a
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	batch.Abort(ctx) // after a commit: nothing
	if _, err := os.Stat(ms.Path(ma.SHA256)); err != nil {
		t.Fatalf("a committed file is gone: %v", err)
	}
	if _, err := ms.Collect(ctx); err != nil { // b has a blob row nobody counts
		t.Fatal(err)
	}
	if got := files(t, dir); len(got) != 1 {
		t.Fatalf("after collecting: %v, want only a", got)
	}

	// An abort removes what the batch placed, but not a file a row names.
	batch = ms.NewBatch()
	batch.Add(ctx, "a-again.txt", "", bytes.NewReader(a))
	batch.Add(ctx, "new.txt", "", strings.NewReader("new"))
	if _, err := batch.Add(ctx, "big.bin", "", bytes.NewReader(make([]byte, 1001))); core.AsError(err).Code != core.CodeMediaTooLarge {
		t.Fatalf("past the file limit: %v", err)
	}
	batch.Abort(ctx)
	if got := files(t, dir); len(got) != 1 {
		t.Fatalf("after an abort: %v", got)
	}
	if _, err := batch.Add(ctx, "late.txt", "", strings.NewReader("late")); err == nil {
		t.Fatal("a batch took a file after its end")
	}

	// A failed commit removes its files too, and says why.
	batch = ms.NewBatch()
	batch.Add(ctx, "x.txt", "", strings.NewReader("x"))
	if err := batch.Commit(ctx, func([]core.Media) error { return os.ErrPermission }); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("commit error: %v", err)
	}
	if got := files(t, dir); len(got) != 1 {
		t.Fatalf("after a failed commit: %v", got)
	}
}
