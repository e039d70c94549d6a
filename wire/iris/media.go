package iris

import (
	"context"
	"errors"
	"io"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
)

// PullChunk is the size of the binary frames of a media.pull. It stays
// well under a connection queue's byte budget (SendWait needs room for a
// frame in half of it) and under clients' usual read limits.
const PullChunk = 256 << 10

type uploadStartReq struct {
	Ref      string `json:"media_ref"`
	Kind     string `json:"kind"`
	Mime     string `json:"mime"`
	Size     *int64 `json:"size"`
	Filename string `json:"filename"`
}

type uploadEndReq struct {
	Ref    string `json:"media_ref"`
	SHA256 string `json:"sha256"`
}

type uploadAckJSON struct {
	OK  bool   `json:"ok"`
	Ref string `json:"media_ref"`
}

type pullReq struct {
	MediaID string `json:"media_id"`
}

type pullHeaderJSON struct {
	MediaID  string `json:"media_id"`
	Kind     string `json:"kind"`
	Mime     string `json:"mime"`
	Size     int64  `json:"size"`
	Filename string `json:"filename"`
	SHA256   string `json:"sha256"`
}

type searchReq struct {
	Query    string  `json:"query"`
	Scope    string  `json:"scope"`
	ChatID   string  `json:"chat_id"`
	ThreadID *string `json:"thread_id"`
	Limit    int     `json:"limit"`
	Before   string  `json:"before_message_id"`
}

type searchResultsJSON struct {
	Query string          `json:"query"`
	Scope string          `json:"scope"`
	Hits  []searchHitJSON `json:"hits"`
	// Beyond the spec's frame (docs/protocol.md): more pages, and the count
	// (first page only).
	HasMore bool `json:"has_more"`
	Total   int  `json:"total,omitempty"`
}

type searchHitJSON struct {
	MessageID string `json:"message_id"`
	ChatID    string `json:"chat_id"`
	ThreadID  string `json:"thread_id,omitempty"` // omitted in a channel's flat lane
	Role      string `json:"role"`
	Snippet   string `json:"snippet"`
	TS        int64  `json:"ts"`
}

// media handles the media and search requests.
func (s *Session) media(ctx context.Context, env *inEnvelope, id int64) error {
	gw := s.cfg.GW
	switch env.Type {
	case "media.upload.start":
		var p uploadStartReq
		if err := payload(env, &p); err != nil {
			return err
		}
		if err := gw.UploadStart(ctx, s.caller(id), gateway.UploadRequest{Ref: p.Ref, Kind: p.Kind, Mime: p.Mime, Size: p.Size, Filename: p.Filename}); err != nil {
			return err
		}
		// A start with an id gets its one reply: a pong carrying it (the
		// schema has no start ack, and media.upload.ack answers the end,
		// which apps send with the same id and wait for by its type).
		if id != 0 {
			s.reply(id, "pong", core.Lane{}, struct{}{})
		}
	case "media.upload.end":
		var p uploadEndReq
		if err := payload(env, &p); err != nil {
			return err
		}
		if err := gw.UploadEnd(ctx, s.caller(id), p.Ref, p.SHA256); err != nil {
			return err
		}
		s.reply(id, "media.upload.ack", core.Lane{}, uploadAckJSON{OK: true, Ref: p.Ref})
	case "media.pull":
		var p pullReq
		if err := payload(env, &p); err != nil {
			return err
		}
		m, f, err := gw.PullMedia(ctx, p.MediaID)
		if err != nil {
			return err
		}
		// The bytes go out at the device's pace, without holding up its
		// other requests.
		return s.queuePull(pullJob{id: id, m: m, f: f})
	case "search":
		var p searchReq
		if err := payload(env, &p); err != nil {
			return err
		}
		lane := core.Lane{ChatID: p.ChatID, ThreadID: deref(p.ThreadID)}
		if lane.ChatID == "" {
			lane = core.Lane{ChatID: deref(env.ChatID), ThreadID: deref(env.ThreadID)}
		}
		scope, page, err := gw.Search(ctx, gateway.SearchRequest{Query: p.Query, Scope: p.Scope, Lane: lane, Limit: p.Limit, Before: p.Before})
		if err != nil {
			return err
		}
		out := searchResultsJSON{Query: p.Query, Scope: scope, Hits: make([]searchHitJSON, len(page.Hits)), HasMore: page.More, Total: page.Total}
		for i, h := range page.Hits {
			out.Hits[i] = searchHitJSON{MessageID: h.MessageID, ChatID: h.Lane.ChatID, ThreadID: h.Lane.ThreadID, Role: h.Role, Snippet: h.Snippet, TS: h.TS}
		}
		s.reply(id, "search.results", core.Lane{}, out)
	}
	return nil
}

// HandleBinary processes a binary frame: the next bytes of the
// connection's open upload. Errors answer the upload's start.
func (s *Session) HandleBinary(ctx context.Context, data []byte) {
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
		return core.Errorf(core.CodeRateLimited, "%d pulls are waiting on this connection already", maxQueuedPulls)
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
	head := marshal(envelope{V: Version, ID: id, Type: "media.pull"},
		pullHeaderJSON{MediaID: m.ID, Kind: m.Kind, Mime: m.Mime, Size: m.Size, Filename: m.Filename, SHA256: m.SHA256})
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
	s.conn.SendWait(s.ctx, hub.Out{Data: marshal(envelope{V: Version, ID: id, Type: "media.pull.end"}, struct {
		OK bool `json:"ok"`
	}{ok})})
}
