package push

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/irisgate/irisgate/store"
)

// FCM sends data messages through Firebase Cloud Messaging HTTP v1 with a
// service account; the OAuth2 token is minted and cached by oauth2.
type FCM struct {
	project  string
	endpoint string // https://fcm.googleapis.com (tests point it elsewhere)
	client   *http.Client
}

const fcmScope = "https://www.googleapis.com/auth/firebase.messaging"

// NewFCM reads a service-account JSON key. endpoint may be empty for the
// real service.
func NewFCM(serviceAccountJSON []byte, endpoint string, base *http.Client) (*FCM, error) {
	var sa struct {
		ProjectID string `json:"project_id"`
	}
	if err := json.Unmarshal(serviceAccountJSON, &sa); err != nil || sa.ProjectID == "" {
		return nil, fmt.Errorf("fcm: the service account file is not a Google service-account key with a project_id")
	}
	cfg, err := google.JWTConfigFromJSON(serviceAccountJSON, fcmScope)
	if err != nil {
		return nil, fmt.Errorf("fcm: %w", err)
	}
	ctx := context.Background()
	if base != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, base)
	}
	if endpoint == "" {
		endpoint = "https://fcm.googleapis.com"
	}
	// ReuseTokenSource caches the token until shortly before it expires.
	client := oauth2.NewClient(ctx, oauth2.ReuseTokenSource(nil, cfg.TokenSource(ctx)))
	return &FCM{project: sa.ProjectID, endpoint: strings.TrimRight(endpoint, "/"), client: client}, nil
}

// Name implements Backend.
func (f *FCM) Name() string { return "fcm" }

// Address implements Backend.
func (f *FCM) Address(d store.Device) string { return d.FCMToken }

// Send implements Backend: a high-priority data message, collapsed per lane.
func (f *FCM) Send(ctx context.Context, token string, n Note) error {
	data := map[string]string{
		"type": n.Kind, "title": n.Title, "body": n.Body, "chat_id": n.ChatID,
		"cursor": strconv.FormatInt(n.Cursor, 10),
	}
	if n.ThreadID != "" {
		data["thread_id"] = n.ThreadID
	}
	body, _ := json.Marshal(map[string]any{"message": map[string]any{
		"token": token,
		"data":  data,
		"android": map[string]any{
			"priority":     "HIGH",
			"collapse_key": n.Collapse,
		},
	}})
	url := fmt.Sprintf("%s/v1/projects/%s/messages:send", f.endpoint, f.project)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode == http.StatusOK {
		return nil
	}
	switch {
	// FCM says a token is gone with 404 NOT_FOUND and an UNREGISTERED
	// error code in the details; a token of another Firebase project
	// (SENDER_ID_MISMATCH) or one FCM cannot parse will never work with
	// these credentials either.
	case res.StatusCode == http.StatusNotFound, bytes.Contains(rb, []byte("UNREGISTERED")),
		bytes.Contains(rb, []byte("SENDER_ID_MISMATCH")),
		res.StatusCode == http.StatusBadRequest && bytes.Contains(rb, []byte("registration token")):
		return ErrGone
	// Any other 400 is this message refused; sent again it would be
	// refused again.
	case res.StatusCode == http.StatusBadRequest:
		return fmt.Errorf("%w: %w", ErrRefused, httpError("fcm", res.StatusCode, string(rb)))
	}
	return httpError("fcm", res.StatusCode, string(rb))
}
