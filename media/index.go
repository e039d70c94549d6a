package media

import (
	"context"

	"github.com/irisgate/irisgate/store"
)

// Index is what the content store needs of the database: the rows that
// say which files exist and who uses them (the counting is the store's).
// Rows are added in the transactions of the writes that use them (Write:
// Tx.PutBlob, PutUpload); the rest is the sweep's.
//
// Replicas share one database and one media directory, so the database,
// not a replica's memory, decides when a file may go: a file is claimed
// (ClaimBlob) before it is put in place or reused, and is removed only
// inside the transaction that deletes its row (DropBlob, DropOrphan), a
// row no use names and no live claim holds. A replica installing a file
// another replica is removing waits for that transaction, then finds the
// file gone and puts its own in place.
type Index interface {
	Write(ctx context.Context, fn func(store.Tx) error) error
	UnusedBlobs(ctx context.Context, limit int) ([]string, error)
	ExpireUploads(ctx context.Context, before int64) (int64, error)
	// ClaimBlob records, committed before it returns, that a file with
	// this sha256 is being put in place or reused: until the claim is
	// released (DropBlob with released) or has grown stale (a replica
	// that crashed mid-install), no replica removes the file.
	ClaimBlob(ctx context.Context, sha256 string, size int64) error
	// DropBlob releases one claim when released is set, then, when remove
	// is not nil, deletes the blob's row if no row uses it and no claim
	// holds it, running remove (which removes the file) before the
	// deletion commits: a failing remove keeps the row. It reports whether
	// the row went.
	DropBlob(ctx context.Context, sha256 string, released bool, remove func() error) (bool, error)
	// DropOrphan runs remove for a stored file no row names, inside a
	// transaction that holds its sha256 against claims until remove has
	// run; it reports false (and runs nothing) when a row names it.
	DropOrphan(ctx context.Context, sha256 string, remove func() error) (bool, error)
}
