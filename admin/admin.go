// Package admin is the local admin channel: how irisgate's own commands
// (token, channels, cron, send, pair) reach the gateway that runs on this
// machine, with no configuration and no network trust.
//
// A running gateway listens on a Unix socket in its data directory
// (admin.sock, 0600 in a 0700 directory): whoever can open it is the
// gateway's owner, which is what file permissions prove and a loopback
// TCP address never does (a reverse proxy makes every visitor loopback).
// The socket speaks HTTP: the admin API below, plus POST /api/send and
// /ws for local callers.
//
// Client is the commands' side. It talks to the running gateway when
// there is one, so a token it makes or revokes takes effect at once (a
// revoked token's live sessions are closed); when none runs it acts on the
// data directory itself, under the directory's lock. Either way the same
// operations run on the same store.
package admin

import (
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Token is a stored device token as the admin channel shows it: never its
// value, which only its creator ever sees.
type Token struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	DeviceID string    `json:"device_id,omitempty"` // when set, the only device the token admits
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used,omitzero"`
}

// NewToken is a token just made, with its value (shown this once).
type NewToken struct {
	Token
	Value string `json:"token"`
}

// Revoked is a revoked token and how many live connections it had, all
// closed by the revocation.
type Revoked struct {
	Token
	Closed int `json:"closed"`
}

// Channel is an entry of the channel directory.
type Channel struct {
	ChatID       string `json:"chat_id"`
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	ParentChatID string `json:"parent_chat_id,omitempty"`
	IsDefault    bool   `json:"is_default,omitempty"`
	Automation   bool   `json:"automation,omitempty"`
}

// Job is a cron job. NextRun is zero for a job that will not run (paused,
// or a one-shot that ran).
type Job struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Schedule string    `json:"schedule"`
	Prompt   string    `json:"prompt,omitempty"`
	Text     string    `json:"text,omitempty"`
	ChatID   string    `json:"chat_id"`
	ThreadID string    `json:"thread_id,omitempty"`
	State    string    `json:"state"` // on, paused or done
	LastRun  time.Time `json:"last_run,omitzero"`
	NextRun  time.Time `json:"next_run,omitzero"`
	LastErr  string    `json:"last_error,omitempty"`
}

// JobSpec is a job to add. ChatID may be a channel's id or its name.
type JobSpec struct {
	Name     string `json:"name,omitempty"`
	Schedule string `json:"schedule"`
	Prompt   string `json:"prompt,omitempty"`
	Text     string `json:"text,omitempty"`
	ChatID   string `json:"chat_id,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
}

// Info describes the gateway behind an admin socket.
type Info struct {
	DataDir string `json:"data_dir"`
	PID     int    `json:"pid"`
	Version string `json:"version,omitempty"`
	// Listen is the address the gateway serves on (as bound: the port a
	// :0 got) and PublicURL its --public-url: irisgate pair names them in
	// its link.
	Listen    string `json:"listen,omitempty"`
	PublicURL string `json:"public_url,omitempty"`
}

func tokenOf(t store.Token) Token {
	return Token{ID: t.ID, Name: t.Name, DeviceID: t.DeviceID, Created: t.Created, LastUsed: t.LastUsed}
}

func channelOf(c core.Channel) Channel {
	return Channel{ChatID: c.ChatID, Name: c.Name, Kind: c.Kind, ParentChatID: c.ParentChatID, IsDefault: c.IsDefault, Automation: c.Automation}
}
