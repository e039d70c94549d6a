package gateway

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// Media: uploads arrive on a connection and become the device's refs;
// message.send attaches refs; the agent's files become offers; devices
// pull files by md_ id. The bytes live in package media's content store.

// MaxMediaRefs bounds the attachments of one message.
const MaxMediaRefs = 32

// UploadRequest is a media.upload.start.
type UploadRequest struct {
	Ref      string
	Kind     string
	Mime     string
	Size     *int64
	Filename string
}

// UploadStart opens an upload on the caller's connection; binary frames
// then carry its bytes (UploadChunk). Nothing answers it unless it fails.
func (g *Gateway) UploadStart(ctx context.Context, from Caller, req UploadRequest) error {
	if g.cfg.Media == nil {
		return ErrNoMedia.New()
	}
	if from.Conn == nil {
		return ErrUploadNoConn.New()
	}
	// The limits on unfinished uploads are the device's and, since a
	// device id is the client's to choose, its token's as well.
	return g.cfg.Media.Start(from.Conn.ID, from.Conn.DeviceID, from.Conn.Token, from.ReqID, req.Ref, req.Kind, req.Mime, req.Filename, req.Size)
}

// UploadChunk appends a binary frame to the connection's open upload. An
// error comes with the id of the request it answers (the upload's start).
func (g *Gateway) UploadChunk(c *hub.Conn, data []byte) (int64, error) {
	if g.cfg.Media == nil {
		return 0, ErrNoMedia.New()
	}
	return g.cfg.Media.Write(c.ID, data)
}

// UploadEnd finishes an upload; the ref is then the device's to attach
// for a while (media.Limits.RefTTL).
func (g *Gateway) UploadEnd(ctx context.Context, from Caller, ref, sha256 string) error {
	if g.cfg.Media == nil {
		return ErrNoMedia.New()
	}
	if from.Conn == nil {
		return ErrUploadNoConn.New()
	}
	_, err := g.cfg.Media.End(ctx, from.Conn.ID, from.Conn.DeviceID, ref, sha256)
	return err
}

// KeepFile stores a file a device sent whole, inside its frames rather
// than as an upload (Hermes Mobile does that), as the device's
// acknowledged upload. The returned ref is then the device's to attach
// with a Send, exactly like an Iris upload's ref in media_refs, so the
// message, the agent's attachment and other devices' pulls take the one
// path. kind, mime and filename are checked and completed as an upload's
// are.
func (g *Gateway) KeepFile(ctx context.Context, from Caller, kind, mime, filename string, r io.Reader) (ref string, err error) {
	if g.cfg.Media == nil {
		return "", ErrNoMedia.New()
	}
	if from.Conn == nil {
		return "", ErrFilesNoConn.New()
	}
	ref = core.NewID("kept_")
	_, err = g.cfg.Media.Put(ctx, from.Conn.DeviceID, ref, core.Media{Kind: kind, Mime: mime, Filename: filename}, r)
	return ref, err
}

// TakesMedia reports whether the gateway keeps files: dialects announce
// media only when it does.
func (g *Gateway) TakesMedia() bool { return g.cfg.Media != nil }

// PullMedia opens a stored file for a device to read. The caller closes it.
func (g *Gateway) PullMedia(ctx context.Context, mediaID string) (core.Media, *os.File, error) {
	if g.cfg.Media == nil {
		return core.Media{}, nil, ErrNoMedia.New()
	}
	m, err := g.st.Media(ctx, mediaID)
	if err != nil {
		return m, nil, notFound(err, ErrUnknownMedia, quote(mediaID))
	}
	f, err := g.cfg.Media.Open(m)
	return m, f, err
}

// dropUploads abandons what a connection was uploading.
func (g *Gateway) dropUploads(c *hub.Conn) {
	if g.cfg.Media != nil {
		g.cfg.Media.Drop(c.ID)
	}
}

// checkRefs vets a message's media_refs before anything is written, so a
// bad ref leaves no trace (no auto-thread, no message): each must be an
// acknowledged upload of this device.
func (g *Gateway) checkRefs(ctx context.Context, dev string, refs []string) ([]string, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	if g.cfg.Media == nil {
		return nil, ErrNoMedia.New()
	}
	var uniq []string // a ref sent twice is attached once
	for _, r := range refs {
		if !slices.Contains(uniq, r) {
			uniq = append(uniq, r)
		}
	}
	refs = uniq
	if len(refs) > MaxMediaRefs {
		return nil, ErrTooManyRefs.New(MaxMediaRefs)
	}
	for _, r := range refs {
		if _, err := g.st.Upload(ctx, dev, r); err != nil {
			return nil, notFound(err, ErrUnknownRef, quote(r))
		}
	}
	return refs, nil
}

// attach turns the refs into the message's media, inside the transaction
// that stores it.
func attach(tx store.Tx, dev string, refs []string, m *core.Message) error {
	for _, r := range refs {
		md, err := tx.AttachUpload(dev, r, m.Lane, m.ID)
		if err != nil {
			return notFound(err, ErrRefGone, quote(r))
		}
		m.Media = append(m.Media, md)
	}
	return nil
}

// withPaths gives the agent where each file of a message is on disk.
func (g *Gateway) withPaths(ms []core.Media) []core.Media {
	if len(ms) == 0 || g.cfg.Media == nil {
		return ms
	}
	out := slices.Clone(ms)
	for i := range out {
		out[i].Path = g.cfg.Media.Path(out[i].SHA256)
	}
	return out
}

// offerFile stores a file the agent sends, ties it to the reply messageID
// (which must exist) and offers it to the devices with a media.offer.
func (g *Gateway) offerFile(ctx context.Context, lk core.Lane, messageID, path string) (core.Media, error) {
	if g.cfg.Media == nil {
		return core.Media{}, ErrNoMedia.New()
	}
	errGone := errors.New("the reply was deleted")
	id := core.NewID("md_")
	m, err := g.cfg.Media.Ingest(ctx, path, func(m core.Media) error {
		m.ID, m.MessageID = id, messageID
		offer := m
		return g.commit(ctx, func(tx store.Tx) error {
			if err := tx.PutBlob(m.SHA256, m.Size); err != nil {
				return err
			}
			ok, err := tx.InsertMedia(m, lk)
			if err == nil && !ok {
				err = errGone
			}
			return err
		}, &core.Event{Type: core.EvMediaOffer, Lane: lk, Media: &offer})
	})
	m.ID = id
	return m, err
}

// collectMedia removes the files deleted messages no longer need. It runs
// before the deleting request's handler returns, so the device's next
// request finds them gone.
func (g *Gateway) collectMedia() {
	if g.cfg.Media == nil {
		return
	}
	if _, err := g.cfg.Media.Collect(context.Background()); err != nil {
		g.log.Error("media: collecting unused files", "err", err)
	}
}
