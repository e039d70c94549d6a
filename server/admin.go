package server

import (
	"context"
	"errors"
	"net/http"
	"os"

	"github.com/irisgate/irisgate/admin"
)

// openAdmin starts the admin socket (package admin): the local commands'
// way into this gateway, and the one place a delivery needs no token.
func (a *App) openAdmin() error {
	ln, err := admin.Listen(a.cfg.DataDir)
	if err != nil {
		// The gateway serves without it; the commands say they cannot
		// reach it.
		a.cfg.Log.Error("no admin socket: irisgate cron, channels and send cannot reach this gateway; irisgate token acts on the database, "+
			"which the gateway watches (a revoked token's connections close within a second)", "err", err)
		return nil
	}
	a.admin = admin.NewServer(admin.Backend{
		Store:  a.Store,
		Revoke: a.Srv.Revoke,
		Send:   http.HandlerFunc(a.Srv.handleSend),
		WS:     http.HandlerFunc(a.Srv.handleWS),
		Info:   admin.Info{DataDir: a.cfg.DataDir, PID: os.Getpid(), Version: a.cfg.Version, Listen: a.cfg.Listen, PublicURL: a.cfg.PublicURL},
		Log:    a.cfg.Log,
	})
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := a.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.cfg.Log.Error("admin socket", "err", err)
		}
	}()
	return nil
}

// AdminSocket is the path of the gateway's admin socket.
func (a *App) AdminSocket() string { return admin.SocketPath(a.cfg.DataDir) }

func (a *App) closeAdmin(ctx context.Context) {
	if a.admin != nil {
		a.admin.Shutdown(ctx)
	}
}
