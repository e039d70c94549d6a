package iris

import (
	"context"
	"errors"
	"io"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// PullChunk is the size of the binary frames of a media.pull. It stays
// well under a connection queue's byte budget (SendWait needs room for a
// frame in half of it) and under clients' usual read limits.
const PullChunk = 256 << 10

func (s *Session) uploadStart(ctx context.Context, r *irisv1.Request, p *irisv1.MediaUploadStart) error {
	if err := s.cfg.GW.UploadStart(ctx, s.caller(r.ID), gateway.UploadRequest{Ref: p.MediaRef, Kind: p.Kind, Mime: p.Mime, Size: p.Size, Filename: p.Filename}); err != nil {
		return err
	}
	// A start with an id gets its one reply: a pong carrying it (the
	// schema has no start ack, and media.upload.ack answers the end,
	// which apps send with the same id and wait for by its type).
	if r.ID != 0 {
		s.reply(r.ID, irisv1.TypePong, core.Lane{}, irisv1.Pong{})
	}
	return nil
}

func (s *Session) uploadEnd(ctx context.Context, r *irisv1.Request, p *irisv1.MediaUploadEnd) error {
	if err := s.cfg.GW.UploadEnd(ctx, s.caller(r.ID), p.MediaRef, p.SHA256); err != nil {
		return err
	}
	s.reply(r.ID, irisv1.TypeMediaUploadAck, core.Lane{}, irisv1.MediaUploadAck{OK: true, MediaRef: p.MediaRef})
	return nil
}

func (s *Session) pullMedia(ctx context.Context, r *irisv1.Request, p *irisv1.MediaPullRequest) error {
	m, f, err := s.cfg.GW.PullMedia(ctx, p.MediaID)
	if err != nil {
		return err
	}
	// The bytes go out at the device's pace, without holding up its
	// other requests.
	return s.queuePull(pullJob{id: r.ID, m: m, f: f})
}

// HandleBinary processes a binary frame: the next bytes of the
// connection's open upload. Errors answer the upload's start.
func (s *Session) HandleBinary(ctx context.Context, data []byte) {
	s.pipe.Wait() // a barrier, as every frame but message.send
	if reqID, err := s.cfg.GW.UploadChunk(s.conn, data); err != nil {
		s.sendError(reqID, err)
	}
}

// maxQueuedPulls bounds the pulls a connection may have waiting.
const maxQueuedPulls = 32

type pullJob struct {
	id int64
	m  core.Media
	f  io.ReadCloser
}

// queuePull hands a pull to the connection's puller, which serves pulls
// one at a time, in the order asked, so one pull's binary frames are never
// mixed with another's.
func (s *Session) queuePull(j pullJob) error {
	s.pullOnce.Do(func() {
		s.pulls = make(chan pullJob, maxQueuedPulls)
		s.wg.Add(1)
		go s.puller()
	})
	select {
	case s.pulls <- j:
		return nil
	default:
		j.f.Close()
		return errTooManyPulls
	}
}

func (s *Session) puller() {
	defer s.wg.Done()
	for {
		select {
		case j := <-s.pulls:
			s.pull(j.id, j.m, j.f)
		case <-s.ctx.Done():
			for {
				select {
				case j := <-s.pulls:
					j.f.Close()
				default:
					return
				}
			}
		}
	}
}

// pull sends a file: the header, its bytes in binary frames read from disk
// as the connection drains, then media.pull.end.
func (s *Session) pull(id int64, m core.Media, f io.ReadCloser) {
	defer f.Close()
	head := marshal(irisv1.Envelope{V: Version, ID: id, Type: irisv1.TypeMediaPull},
		irisv1.MediaPull{MediaID: m.ID, Kind: m.Kind, Mime: m.Mime, Size: m.Size, Filename: m.Filename, SHA256: m.SHA256})
	if err := s.conn.SendWait(s.ctx, hub.Out{Data: head}); err != nil {
		return // the connection is going
	}
	ok := true
	var sent int64
	for sent < m.Size {
		// A fresh buffer per frame: the queue holds it until it is written.
		buf := make([]byte, min(PullChunk, m.Size-sent))
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			if err := s.conn.SendWait(s.ctx, hub.Out{Data: buf[:n], Binary: true}); err != nil {
				return
			}
			sent += int64(n)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				s.cfg.Log.Error("media.pull: reading a stored file", "media_id", m.ID, "err", err)
			} else {
				s.cfg.Log.Error("media.pull: a stored file is shorter than recorded", "media_id", m.ID, "size", m.Size, "read", sent)
			}
			ok = false
			break
		}
	}
	s.conn.SendWait(s.ctx, hub.Out{Data: marshal(irisv1.Envelope{V: Version, ID: id, Type: irisv1.TypeMediaPullEnd}, irisv1.MediaPullEnd{OK: ok})})
}
