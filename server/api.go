package server

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/irisgate/irisgate/core"
)

// The HTTP API for scripts and browsers, beside the WebSocket.
func (s *Server) apiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/send", s.handleSend)
	mux.HandleFunc("GET /api/webpush", s.handleWebPushKey)
}

// maxSendBody bounds a POST /api/send body.
const maxSendBody = 1 << 20

// handleSend posts a message into a channel: how scripts, other schedulers
// and `irisgate send` reach the devices. Only loopback callers, or callers
// with a delivery token, may.
func (s *Server) handleSend(w http.ResponseWriter, r *http.Request) {
	if !s.mayDeliver(r) {
		apiError(w, http.StatusForbidden, core.Errorf(core.CodeAuth, "only loopback callers or a delivery token (Authorization: Bearer …) may send"))
		return
	}
	var req struct {
		ChatID   string `json:"chat_id"`
		ThreadID string `json:"thread_id"`
		Text     string `json:"text"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxSendBody))
	if err := dec.Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, core.Errorf(core.CodeUnsupported, "the body must be JSON {chat_id, thread_id?, text}: %v", err))
		return
	}
	m, err := s.gw.Deliver(r.Context(), core.Lane{ChatID: req.ChatID, ThreadID: req.ThreadID}, req.Text)
	if err != nil {
		e := core.AsError(err)
		status := http.StatusBadRequest
		switch e.Code {
		case core.CodeNotFound:
			status = http.StatusNotFound
		case core.CodeInternal:
			status = http.StatusInternalServerError
		}
		apiError(w, status, e)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "message_id": m.ID, "chat_id": m.Lane.ChatID})
}

func (s *Server) mayDeliver(r *http.Request) bool {
	if ip := net.ParseIP(remoteHost(r.RemoteAddr)); ip != nil && ip.IsLoopback() && r.Header.Get("X-Forwarded-For") == "" {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	for _, t := range s.cfg.MobileDeliverTokens {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(t)) == 1 {
			return true
		}
	}
	return false
}

// handleWebPushKey offers browsers the VAPID public key to subscribe with.
func (s *Server) handleWebPushKey(w http.ResponseWriter, r *http.Request) {
	if s.cfg.WebPushKey == "" {
		apiError(w, http.StatusNotFound, core.Errorf(core.CodeNotFound, "web push is not configured"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"public_key": s.cfg.WebPushKey})
}

func apiError(w http.ResponseWriter, status int, err error) {
	var e *core.Error
	if !errors.As(err, &e) {
		e = core.AsError(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": string(e.Code), "message": e.Message}})
}
