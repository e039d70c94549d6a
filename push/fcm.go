package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

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
// real service. base (may be nil) makes the requests; minting a token is
// bounded by fcmTokenTimeout, since oauth2 fetches it outside the
// request's context.
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
	tokenClient := &http.Client{Timeout: fcmTokenTimeout}
	if base != nil {
		c := *base
		if c.Timeout == 0 || c.Timeout > fcmTokenTimeout {
			c.Timeout = fcmTokenTimeout
		}
		tokenClient = &c
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, tokenClient)
	if endpoint == "" {
		endpoint = "https://fcm.googleapis.com"
	}
	// ReuseTokenSource caches the token until shortly before it expires.
	src := oauth2.ReuseTokenSource(nil, cfg.TokenSource(ctx))
	client := &http.Client{Transport: &oauth2.Transport{Source: src, Base: transport(base)}}
	return &FCM{project: sa.ProjectID, endpoint: strings.TrimRight(endpoint, "/"), client: client}, nil
}

const fcmTokenTimeout = 30 * time.Second

func transport(c *http.Client) http.RoundTripper {
	if c != nil && c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// Name implements Backend.
func (f *FCM) Name() string { return "fcm" }

// Address implements Backend.
func (f *FCM) Address(d store.Device) string { return d.FCMToken }

// Send implements Backend: a high-priority data message, collapsed per
// lane while the phone is offline. The app builds the notification from
// data: tag names the lane's notification, to replace rather than add.
func (f *FCM) Send(ctx context.Context, token string, n Note) error {
	data := map[string]string{
		"type": n.Kind, "title": n.Title, "body": n.Body, "chat_id": n.ChatID,
		"cursor": strconv.FormatInt(n.Cursor, 10), "tag": n.Collapse,
		"priority": map[int]string{4: "high", 3: "default"}[n.priority()],
	}
	if n.ThreadID != "" {
		data["thread_id"] = n.ThreadID
	}
	if n.MessageID != "" {
		data["message_id"] = n.MessageID
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
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return &Error{Backend: "fcm", Kind: ErrAuth, Msg: "Google refused the service account's token request: " + cut(re.Error(), 200),
				Fix: "check --fcm-service-account (IRISGATE_FCM_SERVICE_ACCOUNT): the key may be deleted or disabled"}
		}
		return err
	}
	return fcmAnswer(res)
}

// fcmAnswer classifies an FCM v1 answer by its HTTP status and the
// FcmError code in the error's details (FCM's ErrorCode reference):
// UNREGISTERED (404) and SENDER_ID_MISMATCH (403) mean the token will
// never work with these credentials, nor will one FCM calls "not a valid
// FCM registration token" (400); any other INVALID_ARGUMENT is this
// message refused; 401 (THIRD_PARTY_AUTH_ERROR, UNAUTHENTICATED) and 403
// PERMISSION_DENIED are the service account's; QUOTA_EXCEEDED (429) asks
// us to slow down; UNAVAILABLE and INTERNAL (5xx) pass.
func fcmAnswer(res *http.Response) error {
	rb := readBody(res)
	if res.StatusCode == http.StatusOK {
		return nil
	}
	var je struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []struct {
				ErrorCode string `json:"errorCode"`
			} `json:"details"`
		} `json:"error"`
	}
	json.Unmarshal(rb, &je)
	code := je.Error.Status
	for _, d := range je.Error.Details {
		if d.ErrorCode != "" {
			code = d.ErrorCode
		}
	}
	e := &Error{Backend: "fcm", Status: res.StatusCode, Msg: strings.TrimSpace(code + " " + je.Error.Message)}
	if e.Msg == "" {
		e.Msg = cut(string(rb), 200)
	}
	switch s := res.StatusCode; {
	case code == "UNREGISTERED", code == "SENDER_ID_MISMATCH", s == http.StatusNotFound,
		s == http.StatusBadRequest && strings.Contains(je.Error.Message, "registration token"):
		e.Kind = ErrGone
	case s == http.StatusBadRequest:
		e.Kind = ErrRefused
	case s == http.StatusUnauthorized, s == http.StatusForbidden:
		e.Kind = ErrAuth
		e.Fix = "check --fcm-service-account (IRISGATE_FCM_SERVICE_ACCOUNT): its project must have the Firebase Cloud Messaging API enabled and the account the role to send (Firebase Cloud Messaging API Admin)"
	case s == http.StatusTooManyRequests:
		e.Kind = ErrRateLimited
	}
	return e
}
