package media

import (
	"context"
	"io"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Put stores a whole file that a device sent some other way than an upload
// (Hermes Mobile carries files inside its JSON frames) as that device's
// acknowledged upload under ref, just as End does, so a message can attach
// it. m gives the kind, mime type and file name the device declared: they
// are checked as Describe checks an upload's, the mime type completed as
// an agent's file's is (from the name, else the first bytes). r is read to
// its end; once it passes MaxSize the file is refused before any more of
// it is read.
func (s *Store) Put(ctx context.Context, dev, ref string, m core.Media, r io.Reader) (core.Media, error) {
	var unknown int64 // Describe wants a size; the bytes tell it
	d, err := Describe(ref, m.Kind, m.Mime, m.Filename, &unknown)
	if err != nil {
		return core.Media{}, err
	}
	t, got, err := s.receive(r, d.Filename, m.Mime, s.lim.MaxSize)
	if err == errTooLarge {
		err = ErrFileTooLarge.New(d.Filename, s.lim.MaxSize)
	}
	if err != nil {
		return core.Media{}, err
	}
	d.Size, d.Mime = got.Size, got.Mime
	if m.Kind == "" {
		d.Kind = got.Kind
	}
	err = s.install(ctx, t, func(sha string) error {
		d.SHA256 = sha
		return s.st.Write(ctx, func(tx store.Tx) error {
			if err := tx.PutBlob(sha, d.Size); err != nil {
				return err
			}
			return tx.PutUpload(dev, ref, d)
		})
	})
	return d, err
}
