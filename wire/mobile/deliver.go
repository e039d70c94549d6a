package mobile

import (
	"bytes"
	"context"
	"mime"
	"path/filepath"
	"strings"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/mobilev1"
)

// deliverTo carries out a service delivery: text becomes a message in the
// target device's lane (so Iris devices see it too), media goes to the
// target's connection in chunks. The target must be online.
func (s *Session) deliverTo(ctx context.Context, d mobilev1.Delivery) error {
	target := strings.TrimPrefix(d.Target, SessionPrefix)
	if target == "" {
		target = strings.TrimPrefix(strings.TrimSpace(s.d.cfg.HomeDevice), SessionPrefix)
	}
	if target == "" {
		return ErrNoTarget.New()
	}
	ts := s.d.session(SessionPrefix + target)
	if ts == nil {
		return ErrOffline.New(mobilev1.Truncate(target, 64))
	}
	var data []byte
	if d.Media != nil {
		var e *mobilev1.Error
		if data, e = mobilev1.DecodeB64("media.data", d.Media.Data); e != nil {
			return e
		}
	}
	gw := s.d.cfg.GW
	if strings.TrimSpace(d.Text) != "" {
		if _, err := gw.EnsureChannel(ctx, ts.lane.ChatID, ts.name); err != nil {
			return err
		}
		if _, err := gw.Deliver(ctx, ts.lane, d.Text); err != nil {
			return err
		}
	}
	if d.Media != nil {
		m := d.Media
		mimeType := m.Mime
		if mimeType == "" {
			mimeType = mime.TypeByExtension(strings.ToLower(filepath.Ext(m.Filename)))
		}
		if mimeType == "" {
			mimeType = "application/octet-stream"
		}
		filename := m.Filename
		if filename == "" {
			filename = nameFor(m.Kind, mimeType)
		}
		sctx, cancel := context.WithTimeout(ctx, s.d.cfg.SendTimeout)
		defer cancel()
		err := mediaFrames(mobilev1.MediaOut{ID: core.NewID("md_"), Kind: m.Kind, Mime: mimeType, Filename: filename, Caption: m.Caption},
			int64(len(data)), bytes.NewReader(data), downChunkBytes, func(o hub.Out) error { return ts.conn.SendWait(sctx, o) })
		if err != nil {
			return ErrNotTaken.New(mobilev1.Truncate(target, 64), err)
		}
	}
	return nil
}
