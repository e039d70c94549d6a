package push

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/irisgate/irisgate/store"
)

// Ntfy publishes to a per-device topic on an ntfy server.
type Ntfy struct {
	Server string // e.g. https://ntfy.sh
	Token  string // optional access token
	// Click, when set, is the URL a tap opens.
	Click  string
	Client *http.Client
}

// Name implements Backend.
func (n *Ntfy) Name() string { return "ntfy" }

// Address implements Backend.
func (n *Ntfy) Address(d store.Device) string { return d.NtfyTopic }

// Send implements Backend.
func (n *Ntfy) Send(ctx context.Context, topic string, note Note) error {
	u := strings.TrimRight(n.Server, "/") + "/" + url.PathEscape(topic)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(note.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Title", headerSafe(note.Title))
	prio := "default"
	tags := "speech_balloon"
	switch note.Kind {
	case "picker":
		prio, tags = "high", "question"
	case "cron":
		tags = "alarm_clock"
	}
	req.Header.Set("Priority", prio)
	req.Header.Set("Tags", tags)
	if n.Click != "" {
		req.Header.Set("Click", n.Click)
	}
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
	return answer("ntfy", res)
}

// headerSafe keeps a header value on one line; ntfy reads UTF-8 headers.
func headerSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	return fmt.Sprint(cut(s, 200))
}
