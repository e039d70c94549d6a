package media

import (
	"context"
	"errors"
	"io"

	"github.com/irisgate/irisgate/core"
)

// Batch stores files that one record will name together: the files of a
// delivery, posted as one message. Each file is streamed into place as it
// arrives, limits checked as its bytes come; none of them can be collected
// (no row names them yet) until Commit or Abort.
type Batch struct {
	s     *Store
	files []core.Media
	total int64
	done  bool
}

// NewBatch starts a batch. The caller ends it with Commit or Abort.
func (s *Store) NewBatch() *Batch { return &Batch{s: s} }

// Add streams r into the store: at most MaxSize bytes for the file, and
// MaxPendingBytes for the batch's files together (what a device may hold
// in unfinished uploads, which is what a batch is until it commits). Past
// either, the file is refused with CodeMediaTooLarge before any more of it
// is read, and nothing of it stays. declared is the mime type the sender
// gave, if any.
func (b *Batch) Add(ctx context.Context, filename, declared string, r io.Reader) (core.Media, error) {
	if b.done {
		return core.Media{}, errors.New("media: the batch is over")
	}
	lim := b.s.lim
	limit := min(lim.MaxSize, lim.MaxPendingBytes-b.total)
	t, m, err := b.s.receive(r, filename, declared, limit)
	if err == errTooLarge {
		name := CleanName(filename)
		if limit < lim.MaxSize {
			return m, ErrDeliveryTooLarge.New(name, lim.MaxPendingBytes)
		}
		return m, ErrFileTooLarge.New(name, lim.MaxSize)
	}
	if err != nil {
		return m, err
	}
	sha, err := b.s.place(ctx, t)
	if err != nil {
		if sha != "" {
			b.s.release(ctx, sha, true)
		}
		return m, err
	}
	m.SHA256 = sha
	b.files = append(b.files, m)
	b.total += m.Size
	return m, nil
}

// Files are the files added so far, in order, with their sha256.
func (b *Batch) Files() []core.Media { return b.files }

// Commit runs record, which commits the rows that name the files (with
// store.Tx.PutBlob for each, in the same transaction), and ends the batch.
// When record fails, files no row names are removed.
func (b *Batch) Commit(ctx context.Context, record func(files []core.Media) error) error {
	if b.done {
		return errors.New("media: the batch is over")
	}
	err := record(b.files)
	b.end(ctx, err != nil)
	return err
}

// Abort ends a batch that will not be committed: its files go, unless
// rows name them already (the same bytes were stored before). It does
// nothing after Commit, so it can be deferred.
func (b *Batch) Abort(ctx context.Context) {
	if !b.done {
		b.end(ctx, true)
	}
}

func (b *Batch) end(ctx context.Context, failed bool) {
	b.done = true
	for _, m := range b.files {
		b.s.release(ctx, m.SHA256, failed)
	}
}
