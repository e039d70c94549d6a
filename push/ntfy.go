package push

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/irisgate/irisgate/store"
)

// Ntfy publishes to a per-device topic on an ntfy server.
//
// It publishes as JSON (POST to the server's root, ntfy's "publish as
// JSON"): title and text travel as UTF-8 without header encoding, and a
// bad topic is answered 400 40009 instead of the 404 "page not found" a
// POST to an invalid /<topic> path gets.
//
// ntfy up to v2.15 cannot update a notification: every publish is one
// more. Pushes are therefore held per lane (Config.Hold) so a burst goes
// out as one. Each publish also names the lane's sequence id (JSON
// sequence_id and the X-Sequence-ID header): from v2.16 the ntfy apps
// replace the lane's notification with it; older servers ignore both
// (their JSON decoder drops unknown fields).
//
// ntfy keeps no field of its own for an app's data (a JSON publish's
// unknown fields are dropped): the push's ids (chat_id, thread_id,
// message_id, cursor) travel in the query of the click URL, the one the
// notification opens when tapped. That is Click when set (an app's deep
// link, say), else a link into the web app at App that opens the chat
// (#/c/<lane>, the web app's route); with neither, no ids travel.
type Ntfy struct {
	Server string // e.g. https://ntfy.sh
	Token  string // optional access token
	// Click, when set, is the URL a tap opens; the push's ids are added
	// to its query.
	Click string
	// App is the web app's address (https://iris.example.com/): without
	// Click, a tap opens the push's chat there.
	App    string
	Client *http.Client
}

// Name implements Backend.
func (n *Ntfy) Name() string { return "ntfy" }

// Address implements Backend.
func (n *Ntfy) Address(d store.Device) string { return d.NtfyTopic }

// ntfyMessage is ntfy's JSON publish format (server/types.go
// publishMessage), plus sequence_id (v2.16).
type ntfyMessage struct {
	Topic      string   `json:"topic"`
	Title      string   `json:"title,omitempty"`
	Message    string   `json:"message"`
	Priority   int      `json:"priority,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Click      string   `json:"click,omitempty"`
	SequenceID string   `json:"sequence_id,omitempty"`
}

// Send implements Backend.
func (n *Ntfy) Send(ctx context.Context, topic string, note Note) error {
	if err := ValidNtfyTopic(topic); err != nil {
		// Stored before topics were checked at registration: ntfy would
		// refuse it (40009/40010), so no request is made.
		return &Error{Backend: "ntfy", Kind: ErrInvalidAddress, Msg: err.Error()}
	}
	m := ntfyMessage{
		Topic: topic, Title: oneLine(note.Title), Message: note.Body,
		Priority: note.priority(), Tags: []string{note.tag()},
		Click: n.click(note), SequenceID: SequenceID(note),
	}
	body, _ := json.Marshal(m)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(n.Server, "/")+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Sequence-ID", m.SequenceID)
	if n.Token != "" {
		req.Header.Set("Authorization", "Bearer "+n.Token)
	}
	c := n.Client
	if c == nil {
		c = http.DefaultClient
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	return ntfyAnswer(n.Server, res)
}

// click is the tap URL with the push's ids in its query, so whatever
// opens it (the web app, an app's deep link) lands in the right chat and
// knows which cursor the push announced.
func (n *Ntfy) click(note Note) string {
	base, route := n.Click, ""
	if base == "" {
		base = n.App
		if note.ChatID != "" {
			lane := note.ChatID
			if note.ThreadID != "" {
				lane += "/" + note.ThreadID // the web app's laneKey
			}
			route = "/c/" + lane
		}
	}
	if base == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("chat_id", note.ChatID)
	set("thread_id", note.ThreadID)
	set("message_id", note.MessageID)
	if note.Cursor > 0 {
		set("cursor", strconv.FormatInt(note.Cursor, 10))
	}
	u.RawQuery = q.Encode()
	if route != "" {
		// As the web app writes it: '#/c/' + encodeURIComponent(lane).
		u.Fragment, u.RawFragment = route, "/c/"+url.PathEscape(route[len("/c/"):])
	}
	return u.String()
}

// SequenceID names the notification a push updates on ntfy v2.16 and
// later: one per lane, and another for the lane's questions, so an
// approval is never overwritten by the chat that follows it. It is made of
// the characters ntfy allows in topics, which its sequence ids share.
func SequenceID(n Note) string {
	class := "news"
	if n.Kind == KindPicker {
		class = "ask"
	}
	h := sha256.Sum256([]byte(class + "\x00" + n.Collapse))
	return "ig-" + class + "-" + hex.EncodeToString(h[:10])
}

// ntfyAnswer classifies an ntfy server's answer. ntfy answers errors as
// JSON {"code":…,"http":…,"error":…} (server/server.go handleError,
// codes in server/errors.go):
//
//   - 400 40009 "topic invalid" and 40010 "topic name is not allowed"
//     (its disallowed-topics list): the topic can never work.
//   - 401 40101 "unauthorized": the access token is wrong or unknown.
//   - 403 40301 "forbidden": the token's user may not write the topic.
//   - 404 40401 "page not found": the path is not ntfy's. A JSON publish
//     goes to the root, which every ntfy server routes, so the configured
//     URL is not an ntfy server (or a proxy in front maps it elsewhere).
//     Topics are made on the fly: ntfy never calls one gone.
//   - 413 41301/41303: the message is too large, sent again it still is.
//   - 429 42901/42908…: request or daily message limits; 42909 too many
//     auth failures from this address.
//   - any other 400: a request it will never accept.
//   - 5xx (and 507 50701, UnifiedPush only): passing.
func ntfyAnswer(server string, res *http.Response) error {
	body := readBody(res)
	if res.StatusCode/100 == 2 {
		return nil
	}
	var je struct {
		Code  int    `json:"code"`
		Error string `json:"error"`
	}
	json.Unmarshal(body, &je)
	e := &Error{Backend: "ntfy", Status: res.StatusCode, Code: je.Code, Msg: je.Error}
	if e.Msg == "" {
		e.Msg = cut(string(body), 200)
	}
	switch s := res.StatusCode; {
	case je.Code == 40009 || je.Code == 40010:
		e.Kind = ErrInvalidAddress
	case s == http.StatusUnauthorized:
		e.Kind = ErrAuth
		e.Fix = "the ntfy server does not accept the access token: set --ntfy-token (IRISGATE_NTFY_TOKEN) to a valid one (ntfy token add USER)"
	case s == http.StatusForbidden:
		e.Kind = ErrAuth
		e.Fix = "the ntfy server does not let this gateway publish to the topic: set --ntfy-token (IRISGATE_NTFY_TOKEN) to a token of a user with write access to it (ntfy access USER TOPIC write)"
	case s == http.StatusNotFound:
		e.Kind = ErrMisconfigured
		e.Fix = "--ntfy-server (IRISGATE_NTFY_SERVER) " + strconv.Quote(server) + " does not look like an ntfy server: give its base URL"
	case s == http.StatusTooManyRequests:
		e.Kind = ErrRateLimited
		if je.Code == 42909 {
			e.Kind = ErrAuth
			e.Fix = "the ntfy server blocks this address after failed logins: check --ntfy-token (IRISGATE_NTFY_TOKEN)"
		}
	case s == http.StatusRequestEntityTooLarge, s/100 == 4:
		e.Kind = ErrRefused
	}
	return e
}

// oneLine keeps a title on one line and short.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	return cut(s, 200)
}
