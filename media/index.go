package media

import (
	"context"

	"github.com/irisgate/irisgate/store"
)

// Index is what the content store needs of the database: the rows that
// say which files exist and who uses them (the counting is the store's).
// Rows are added in the transactions of the writes that use them (Write:
// Tx.PutBlob, PutUpload); the rest is the sweep's.
type Index interface {
	Write(ctx context.Context, fn func(store.Tx) error) error
	HasBlob(ctx context.Context, sha256 string) (bool, error)
	UnusedBlobs(ctx context.Context, limit int) ([]string, error)
	ForgetBlob(ctx context.Context, sha256 string) (bool, error)
	ExpireUploads(ctx context.Context, before int64) (int64, error)
}
