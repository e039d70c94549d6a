package admin

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/irisgate/irisgate/internal/httperr"
)

// Backend is what a running gateway gives its admin socket.
type Backend struct {
	Store Store
	// Revoke closes the live connections of a token just revoked and
	// returns how many there were.
	Revoke func(tokenID string) int
	// Send and WS are the gateway's POST /api/send and GET /ws handlers:
	// on this socket IsLocal holds for their requests, which is what lets
	// a delivery through without a delivery token.
	Send, WS http.Handler
	Info     Info
	Log      *slog.Logger
}

// The admin API's paths.
const (
	pathInfo     = "/admin/v1/info"
	pathTokens   = "/admin/v1/tokens"
	pathRevoke   = "/admin/v1/tokens/revoke"
	pathChannels = "/admin/v1/channels"
	pathCron     = "/admin/v1/cron"
)

// maxBody bounds an admin request's JSON body.
const maxBody = 64 << 10

type localKey struct{}

// IsLocal reports whether a request came over the admin socket: from a
// process of the gateway's own user on this machine.
func IsLocal(ctx context.Context) bool {
	v, _ := ctx.Value(localKey{}).(bool)
	return v
}

// NewServer is the HTTP server of the admin socket: every request it
// serves is local (IsLocal), which no request over TCP can be.
func NewServer(b Backend) *http.Server {
	if b.Log == nil {
		b.Log = slog.Default()
	}
	return &http.Server{
		Handler:           handler(b),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext:       func(ctx context.Context, _ net.Conn) context.Context { return context.WithValue(ctx, localKey{}, true) },
		ErrorLog:          slog.NewLogLogger(b.Log.Handler(), slog.LevelWarn),
	}
}

func handler(b Backend) http.Handler {
	o := ops{st: b.Store, revoke: b.Revoke}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathInfo, func(w http.ResponseWriter, r *http.Request) { answer(w, b.Info, nil) })
	mux.HandleFunc("GET "+pathTokens, func(w http.ResponseWriter, r *http.Request) {
		toks, err := o.tokens(r.Context())
		answer(w, toks, err)
	})
	mux.HandleFunc("POST "+pathTokens, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Name     string `json:"name"`
			DeviceID string `json:"device_id"`
		}
		if !decode(w, r, &req) {
			return
		}
		t, err := o.createToken(r.Context(), req.Name, req.DeviceID)
		if err == nil {
			b.Log.Info("admin: token created", "token_id", t.ID, "name", t.Name, "device", t.DeviceID)
		}
		answer(w, t, err)
	})
	mux.HandleFunc("POST "+pathRevoke, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Ref string `json:"ref"`
		}
		if !decode(w, r, &req) {
			return
		}
		rv, err := o.revokeToken(r.Context(), req.Ref)
		if err == nil {
			b.Log.Info("admin: token revoked", "token_id", rv.ID, "name", rv.Name, "closed_connections", rv.Closed)
		}
		answer(w, rv, err)
	})
	mux.HandleFunc("GET "+pathChannels, func(w http.ResponseWriter, r *http.Request) {
		chs, err := o.channels(r.Context())
		answer(w, chs, err)
	})
	mux.HandleFunc("GET "+pathCron, func(w http.ResponseWriter, r *http.Request) {
		jobs, err := o.cronList(r.Context())
		answer(w, jobs, err)
	})
	mux.HandleFunc("POST "+pathCron, func(w http.ResponseWriter, r *http.Request) {
		var req JobSpec
		if !decode(w, r, &req) {
			return
		}
		j, err := o.cronAdd(r.Context(), req)
		answer(w, j, err)
	})
	mux.HandleFunc("POST "+pathCron+"/{id}/{action}", func(w http.ResponseWriter, r *http.Request) {
		j, err := o.cronAct(r.Context(), r.PathValue("action"), r.PathValue("id"))
		answer(w, j, err)
	})
	if b.Send != nil {
		mux.Handle("POST /api/send", b.Send)
	}
	if b.WS != nil {
		mux.Handle("GET /ws", b.WS)
	}
	return mux
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		answer(w, nil, ErrMalformed.New(err))
		return false
	}
	return true
}

func answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		// Only the gateway's owner reaches this socket: an internal
		// error's cause is told.
		httperr.Write(w, err, true)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
