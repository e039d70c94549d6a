package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/httperr"
)

// The HTTP API for scripts and browsers, beside the WebSocket.
func (s *Server) apiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/send", s.handleSend)
	mux.HandleFunc("GET /api/webpush", s.handleWebPushKey)
}

// maxSendBody bounds a POST /api/send JSON body.
const maxSendBody = 1 << 20

// maxFormField bounds a multipart field other than a file (chat_id,
// thread_id, text).
const maxFormField = gateway.MaxTextBytes

// handleSend posts a message into a channel: how scripts, other schedulers
// and `irisgate send` reach the devices. The trust rule: over the admin
// socket (the gateway owner's own processes) no token is needed; over TCP
// a delivery token is, always (Authorization: Bearer), since a TCP peer's
// address proves nothing, and a browser may send it only from our own
// pages. A JSON body (application/json) carries text; a multipart/form-
// data body carries files (any part with a file name), with chat_id and
// thread_id before them and text as an optional caption. chat_id may name
// a channel by its name too.
func (s *Server) handleSend(w http.ResponseWriter, r *http.Request) {
	// Cross-site pages were refused before (sameOriginWrites).
	local := admin.IsLocal(r.Context())
	if !local && !s.hasDeliverToken(r) {
		writeError(w, ErrDeliverToken.New())
		return
	}
	var (
		m   core.Message
		err error
	)
	switch mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt {
	case "multipart/form-data":
		m, err = s.sendForm(r)
	case "application/json":
		m, err = s.sendJSON(r)
	default:
		// A page of any site may post text/plain or a form without asking
		// first; JSON as JSON is what scripts send.
		writeError(w, httperr.ErrContentType.New(sendTypes, r.Header.Get("Content-Type")))
		return
	}
	if err != nil {
		if core.AsError(err).Code == core.CodeInternal {
			s.log.Error("api send", "err", err)
		}
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(sendResult(m))
}

func (s *Server) sendJSON(r *http.Request) (core.Message, error) {
	var req struct {
		ChatID   string `json:"chat_id"`
		ThreadID string `json:"thread_id"`
		Text     string `json:"text"`
	}
	body := &io.LimitedReader{R: r.Body, N: maxSendBody + 1}
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		if body.N <= 0 {
			// Cut off, the body would read as broken JSON ("unexpected
			// EOF"): say what is really wrong.
			return core.Message{}, ErrSendBodyTooLarge.New(maxSendBody, gateway.MaxTextBytes)
		}
		return core.Message{}, ErrSendBody.New(err)
	}
	lane := core.Lane{ChatID: req.ChatID, ThreadID: req.ThreadID}
	if err := s.gw.NameLane(r.Context(), &lane); err != nil {
		return core.Message{}, err
	}
	return s.gw.Deliver(r.Context(), lane, req.Text)
}

// sendForm streams a multipart body's files into the media store as they
// arrive, never holding a whole file in memory, and posts them as one
// message. Whatever fails, the files stored for it are removed.
func (s *Server) sendForm(r *http.Request) (core.Message, error) {
	ctx := r.Context()
	mr, err := r.MultipartReader()
	if err != nil {
		return core.Message{}, ErrMultipart.New(err)
	}
	var (
		lane    core.Lane
		caption string
		del     *gateway.FileDelivery
	)
	defer func() {
		if del != nil {
			del.Abort(context.WithoutCancel(ctx))
		}
	}()
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return core.Message{}, ErrMultipart.New(err)
		}
		if p.FileName() == "" {
			v, err := formValue(p)
			if err != nil {
				return core.Message{}, err
			}
			switch p.FormName() {
			case "chat_id", "thread_id":
				if del != nil {
					return core.Message{}, ErrLaneAfterFiles.New(p.FormName())
				}
				if p.FormName() == "chat_id" {
					lane.ChatID = v
				} else {
					lane.ThreadID = v
				}
			case "text":
				caption = v
			}
			continue
		}
		if del == nil {
			// The target is checked before the first byte is stored.
			if err := s.gw.NameLane(ctx, &lane); err != nil {
				return core.Message{}, err
			}
			if del, err = s.gw.DeliverFiles(ctx, lane); err != nil {
				return core.Message{}, err
			}
		}
		body := &partReader{r: p}
		if _, err := del.Add(ctx, p.FileName(), p.Header.Get("Content-Type"), body); err != nil {
			if body.err != nil && !errors.As(err, new(*core.Error)) {
				// The sender's fault (it went away, or its body is
				// malformed), not the gateway's.
				return core.Message{}, ErrBodyBrokeOff.New(p.FileName(), body.err)
			}
			return core.Message{}, err
		}
	}
	if del == nil {
		if err := s.gw.NameLane(ctx, &lane); err != nil {
			return core.Message{}, err
		}
		return s.gw.Deliver(ctx, lane, caption) // a form with text only
	}
	m, err := del.Post(ctx, caption)
	if err == nil {
		del = nil
	}
	return m, err
}

// partReader remembers a failure to read the request, to tell it from a
// failure to store what was read.
type partReader struct {
	r   io.Reader
	err error
}

func (p *partReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && err != io.EOF {
		p.err = err
	}
	return n, err
}

// formValue reads a multipart field that is not a file.
func formValue(p *multipart.Part) (string, error) {
	b, err := io.ReadAll(io.LimitReader(p, maxFormField+1))
	if err != nil {
		return "", ErrMultipart.New(err)
	}
	if len(b) > maxFormField {
		return "", ErrFieldTooLong.New(p.FormName(), maxFormField)
	}
	return string(b), nil
}

// sendResult is what a successful send answers: the message's id, its
// lane and the ids of its files.
func sendResult(m core.Message) map[string]any {
	res := map[string]any{"ok": true, "message_id": m.ID, "chat_id": m.Lane.ChatID}
	if m.Lane.ThreadID != "" {
		res["thread_id"] = m.Lane.ThreadID
	}
	if len(m.Media) > 0 {
		files := make([]map[string]any, len(m.Media))
		for i, f := range m.Media {
			files[i] = map[string]any{"media_id": f.ID, "filename": f.Filename, "kind": f.Kind, "mime": f.Mime, "size": f.Size, "sha256": f.SHA256}
		}
		res["media"] = files
	}
	return res
}

// hasDeliverToken reports whether r carries one of the delivery tokens.
func (s *Server) hasDeliverToken(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	h := sha256.Sum256([]byte(tok))
	found := false
	for _, t := range s.cfg.Mobile.DeliverTokens {
		// Hashes are compared: ConstantTimeCompare is constant only for
		// inputs of one length.
		if th := sha256.Sum256([]byte(t)); subtle.ConstantTimeCompare(h[:], th[:]) == 1 {
			found = true
		}
	}
	return found
}

// handleWebPushKey offers browsers the VAPID public key to subscribe with.
func (s *Server) handleWebPushKey(w http.ResponseWriter, r *http.Request) {
	if s.cfg.WebPushKey == "" {
		writeError(w, ErrNoWebPush.New())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"public_key": s.cfg.WebPushKey})
}
