package gateway

import (
	"context"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/store"
)

// FileDelivery is a service delivery of files (POST /api/send with a
// file, irisgate send --file): each file is stored as its bytes stream in,
// then all of them are posted as one message of role cron, like a text
// delivery. End it with Post or Abort.
type FileDelivery struct {
	g     *Gateway
	lane  core.Lane
	ch    core.Channel
	batch *media.Batch
}

// DeliverFiles starts a delivery of files into a lane, which must exist:
// a bad target is refused before any byte is stored.
func (g *Gateway) DeliverFiles(ctx context.Context, lk core.Lane) (*FileDelivery, error) {
	if g.cfg.Media == nil {
		return nil, ErrNoMedia.New()
	}
	ch, err := g.resolveLane(ctx, &lk)
	if err != nil {
		return nil, err
	}
	return &FileDelivery{g: g, lane: lk, ch: ch, batch: g.cfg.Media.NewBatch()}, nil
}

// Add stores a file from r (mimeType as the sender declared it, or
// empty), checking the media store's limits as the bytes arrive; a file
// past them is refused with CodeMediaTooLarge and nothing of it stays.
func (d *FileDelivery) Add(ctx context.Context, filename, mimeType string, r io.Reader) (core.Media, error) {
	if len(d.batch.Files()) >= MaxMediaRefs {
		return core.Media{}, ErrTooManyFiles.New(MaxMediaRefs)
	}
	return d.batch.Add(ctx, filename, mimeType, r)
}

// Post sends the files, with caption as the message's text, and a cron
// notification. Unlike a text delivery the message is kept in history: its
// files live as long as it does, and a device that was away finds them
// there.
func (d *FileDelivery) Post(ctx context.Context, caption string) (core.Message, error) {
	files := d.batch.Files()
	switch {
	case len(files) == 0:
		d.Abort(ctx)
		return core.Message{}, ErrNoFile.New()
	case !utf8.ValidString(caption):
		d.Abort(ctx)
		return core.Message{}, ErrTextNotUTF8.New()
	case len(caption) > MaxTextBytes:
		d.Abort(ctx)
		return core.Message{}, ErrTextTooLong.New(len(caption), MaxTextBytes)
	}
	lk := d.lane
	m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleCron, Text: caption, TS: time.Now().UnixMilli()}
	for _, f := range files {
		f.ID = core.NewID("md_")
		m.Media = append(m.Media, f)
	}
	err := d.batch.Commit(ctx, func([]core.Media) error {
		return d.g.commit(ctx, func(tx store.Tx) error {
			for _, f := range m.Media {
				if err := tx.PutBlob(f.SHA256, f.Size); err != nil {
					return err
				}
			}
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
			for _, f := range m.Media {
				f.MessageID = m.ID
				if _, err := tx.InsertMedia(f, lk); err != nil {
					return err
				}
			}
			return nil
		}, &core.Event{Type: core.EvMessage, Lane: lk, Message: &m})
	})
	if err != nil {
		return m, err
	}
	n := &core.Notification{Kind: "cron", Title: d.ch.Name, Body: mediaBody(m), TS: m.TS}
	if err := d.g.commit(ctx, nil, &core.Event{Type: core.EvNotification, Lane: lk, Notification: n}); err != nil {
		d.g.log.Warn("delivery notification", "lane", lk.String(), "err", err)
	}
	return m, nil
}

// Abort drops the files stored so far. It does nothing after Post, so it
// can be deferred.
func (d *FileDelivery) Abort(ctx context.Context) { d.batch.Abort(ctx) }

// mediaBody is what a notification (or a push) says of a message: its
// text, or the names of its files when it has none.
func mediaBody(m core.Message) string {
	if strings.TrimSpace(m.Text) != "" {
		return firstLine(m.Text, 140)
	}
	names := make([]string, len(m.Media))
	for i, f := range m.Media {
		names[i] = f.Filename
	}
	return firstLine("📎 "+strings.Join(names, ", "), 140)
}
