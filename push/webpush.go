package push

import (
	"context"
	"encoding/json"
	"net/http"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/irisgate/irisgate/store"
)

// WebPush sends encrypted notifications to browser subscriptions.
type WebPush struct {
	PublicKey  string // VAPID, base64url; offered to browsers
	PrivateKey string
	Subscriber string // contact (mailto: or https:) in the VAPID token
	Client     *http.Client
}

// GenerateVAPID makes a new VAPID key pair.
func GenerateVAPID() (public, private string, err error) {
	private, public, err = webpush.GenerateVAPIDKeys()
	return public, private, err
}

// Name implements Backend.
func (w *WebPush) Name() string { return "webpush" }

// Address implements Backend: the subscription, as the JSON Send takes.
func (w *WebPush) Address(d store.Device) string {
	if d.WebPush == nil {
		return ""
	}
	b, _ := json.Marshal(webpush.Subscription{Endpoint: d.WebPush.Endpoint, Keys: webpush.Keys{P256dh: d.WebPush.Keys.P256dh, Auth: d.WebPush.Keys.Auth}})
	return string(b)
}

// Send implements Backend. The push service replaces a message not yet
// delivered that has the same Topic (RFC 8030 §5.4, one per lane); what
// the browser shows is the service worker's choice: tag names the lane's
// notification, for showNotification to replace rather than add. Urgency
// follows RFC 8030 §5.3: high for the agent asking, normal (a chat
// message) for the rest.
func (w *WebPush) Send(ctx context.Context, subscription string, n Note) error {
	var sub webpush.Subscription
	if err := json.Unmarshal([]byte(subscription), &sub); err != nil || sub.Endpoint == "" {
		return &Error{Backend: "webpush", Kind: ErrGone, Msg: "the stored subscription is unusable"}
	}
	payload, _ := json.Marshal(map[string]any{
		"title": n.Title, "body": n.Body, "chat_id": n.ChatID, "thread_id": n.ThreadID, "message_id": n.MessageID,
		"cursor": n.Cursor, "type": n.Kind, "tag": n.Collapse, "priority": n.priority(),
	})
	urgency := webpush.UrgencyNormal
	if n.priority() >= 4 {
		urgency = webpush.UrgencyHigh
	}
	opts := &webpush.Options{
		Subscriber: w.Subscriber, VAPIDPublicKey: w.PublicKey, VAPIDPrivateKey: w.PrivateKey,
		TTL: 24 * 3600, Topic: topic(n.Collapse), Urgency: urgency,
	}
	if w.Client != nil {
		opts.HTTPClient = w.Client
	}
	res, err := webpush.SendNotificationWithContext(ctx, payload, &sub, opts)
	if err != nil {
		return err
	}
	return answer("webpush", res)
}

// topic makes a collapse key fit the Topic header (≤ 32 URL-safe chars).
func topic(s string) string {
	const ok = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	out := make([]byte, 0, 32)
	for i := 0; i < len(s) && len(out) < 32; i++ {
		c := s[i]
		for j := 0; j < len(ok); j++ {
			if ok[j] == c {
				out = append(out, c)
				break
			}
		}
	}
	return string(out)
}
