package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/irisgate/irisgate/push"
)

// PushConfig configures the push backends; each is on when configured.
type PushConfig struct {
	// FCMServiceAccount is the path of a Firebase service-account JSON key.
	FCMServiceAccount string
	FCMEndpoint       string // tests only: the FCM API base URL
	NtfyServer        string // e.g. https://ntfy.sh
	NtfyToken         string
	// NtfyClick is the URL a tap on an ntfy notification opens (ntfy's
	// Click header), e.g. an app's deep link; the push's ids go in its
	// query. Empty: a link to the push's chat in the web app at WebApp.
	NtfyClick string
	// WebApp is the web app's address as devices reach it (serve's
	// --public-url, else the address its pairing links name); "": none.
	WebApp string
	// WebPush turns on Web Push; its VAPID keys are made on first start
	// and kept in the data directory.
	WebPush           bool
	WebPushSubscriber string // mailto: or https: contact in the VAPID token
	Content           string // full | preview | ids
	// Hold is how long a lane's push waits for more news of the lane
	// before it goes out (0: none; the command line's default is
	// push.DefaultHold).
	Hold time.Duration
	// Timeout bounds each request to a push service (0:
	// push.DefaultTimeout).
	Timeout    time.Duration
	HTTPClient *http.Client
}

// backends builds the configured push backends.
func (c PushConfig) backends(dataDir string) ([]push.Backend, string, error) {
	var out []push.Backend
	var vapidPublic string
	if c.FCMServiceAccount != "" {
		key, err := os.ReadFile(c.FCMServiceAccount)
		if err != nil {
			return nil, "", fmt.Errorf("fcm service account: %w", err)
		}
		f, err := push.NewFCM(key, c.FCMEndpoint, c.HTTPClient)
		if err != nil {
			return nil, "", err
		}
		out = append(out, f)
	}
	if c.NtfyServer != "" {
		out = append(out, &push.Ntfy{Server: c.NtfyServer, Token: c.NtfyToken, Click: c.NtfyClick, App: c.WebApp, Client: c.HTTPClient})
	}
	if c.WebPush {
		pub, priv, err := vapidKeys(filepath.Join(dataDir, "vapid.json"))
		if err != nil {
			return nil, "", err
		}
		sub := c.WebPushSubscriber
		if sub == "" {
			sub = "mailto:irisgate@localhost"
		}
		out = append(out, &push.WebPush{PublicKey: pub, PrivateKey: priv, Subscriber: sub, Client: c.HTTPClient})
		vapidPublic = pub
	}
	return out, vapidPublic, nil
}

// vapidKeys loads the VAPID key pair, making one on first use.
func vapidKeys(path string) (public, private string, err error) {
	var k struct {
		Public  string `json:"public"`
		Private string `json:"private"`
	}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &k); err == nil && k.Public != "" && k.Private != "" {
			return k.Public, k.Private, nil
		}
	}
	if k.Public, k.Private, err = push.GenerateVAPID(); err != nil {
		return "", "", err
	}
	b, _ := json.Marshal(k)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", "", fmt.Errorf("saving VAPID keys: %w", err)
	}
	return k.Public, k.Private, nil
}
