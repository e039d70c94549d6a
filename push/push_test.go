package push

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/hkdf"

	"github.com/irisgate/irisgate/internal/fakentfy"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fakeGoogle is an OAuth2 token endpoint (JWT bearer grant, RFC 7523)
// and an FCM v1 endpoint that checks the bearer token it minted and the
// payload shape. Its errors are FCM's documented ones (the v1 API's
// ErrorCode reference): google.rpc.Status JSON with an FcmError detail,
// UNREGISTERED 404, SENDER_ID_MISMATCH 403, INVALID_ARGUMENT 400,
// THIRD_PARTY_AUTH_ERROR 401, QUOTA_EXCEEDED 429, INTERNAL 500; a
// revoked key makes the token endpoint answer 400 invalid_grant.
type fakeGoogle struct {
	srv      *httptest.Server
	mu       sync.Mutex
	tokens   int // tokens minted
	messages []map[string]any
	gone     map[string]bool   // device tokens to answer UNREGISTERED
	answers  map[string]string // device tokens to answer another FCM error
	fail     int               // next N sends answer 500
	revoked  bool              // the service account's key was deleted
}

func newFakeGoogle(t *testing.T) *fakeGoogle {
	f := &fakeGoogle{gone: map[string]bool{}, answers: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		f.mu.Lock()
		revoked := f.revoked
		f.mu.Unlock()
		if revoked {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
			return
		}
		if r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || strings.Count(r.Form.Get("assertion"), ".") != 2 {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.tokens++
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"ya29.fake","expires_in":3600,"token_type":"Bearer"}`)
	})
	mux.HandleFunc("POST /v1/projects/demo-project/messages:send", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer ya29.fake" {
			http.Error(w, `{"error":{"code":401,"status":"UNAUTHENTICATED"}}`, http.StatusUnauthorized)
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad json", 400)
			return
		}
		msg, _ := body["message"].(map[string]any)
		tok, _ := msg["token"].(string)
		if _, ok := msg["data"].(map[string]any); !ok || tok == "" {
			http.Error(w, `{"error":{"code":400,"status":"INVALID_ARGUMENT"}}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fail > 0 {
			f.fail--
			http.Error(w, `{"error":{"code":500,"status":"INTERNAL"}}`, http.StatusInternalServerError)
			return
		}
		switch f.answers[tok] {
		case "SENDER_ID_MISMATCH":
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":{"code":403,"status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"SENDER_ID_MISMATCH"}]}}`)
			return
		case "BAD_TOKEN":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT"}}`)
			return
		case "THIRD_PARTY_AUTH_ERROR":
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"code":401,"status":"UNAUTHENTICATED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"THIRD_PARTY_AUTH_ERROR"}]}}`)
			return
		case "PERMISSION_DENIED":
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":{"code":403,"message":"Permission 'cloudmessaging.messages.create' denied on resource","status":"PERMISSION_DENIED"}}`)
			return
		case "QUOTA_EXCEEDED":
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}`)
			return
		case "BAD_MESSAGE":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":400,"message":"Invalid value at 'message.data'","status":"INVALID_ARGUMENT"}}`)
			return
		}
		if f.gone[tok] {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":404,"status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}`)
			return
		}
		f.messages = append(f.messages, msg)
		io.WriteString(w, `{"name":"projects/demo-project/messages/1"}`)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func serviceAccount(t *testing.T, tokenURI string) []byte {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "demo-project", "private_key_id": "k1", "private_key": string(pemKey),
		"client_email": "irisgate@demo-project.iam.gserviceaccount.com", "token_uri": tokenURI,
	})
	return b
}

func TestFCMSendsAndDropsUnregistered(t *testing.T) {
	g := newFakeGoogle(t)
	fcm, err := NewFCM(serviceAccount(t, g.srv.URL+"/token"), g.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	ctx := context.Background()
	st.SeeDevice(ctx, store.Device{ID: "phone", FCMToken: "tok-phone"})
	st.SeeDevice(ctx, store.Device{ID: "old", FCMToken: "tok-old"})
	g.gone["tok-old"] = true
	p := New(st, slog.Default(), Config{Backends: []Backend{fcm}, Content: ContentFull})

	p.Enqueue(ctx, "phone", Note{Title: "Agent", Body: "first", ChatID: "default", MessageID: "m_1", Cursor: 5, Kind: "message", Collapse: "default"})
	p.Enqueue(ctx, "phone", Note{Title: "Agent", Body: "second", ChatID: "default", ThreadID: "t_1", MessageID: "m_2", Cursor: 7, Kind: "message", Collapse: "default"})
	p.Enqueue(ctx, "old", Note{Title: "Agent", Body: "x", ChatID: "default", Cursor: 7, Kind: "message", Collapse: "default"})
	p.SendDue(ctx)

	if len(g.messages) != 1 {
		t.Fatalf("%d FCM messages, want 1 (collapsed per lane)", len(g.messages))
	}
	data := g.messages[0]["data"].(map[string]any)
	// The ids the app needs to open the chat and skip what sync replays
	// (issue 14 item 7), and the lane's tag to replace its notification.
	if data["body"] != "second" || data["cursor"] != "7" || data["chat_id"] != "default" || data["thread_id"] != "t_1" ||
		data["message_id"] != "m_2" || data["tag"] != "default" || data["priority"] != "default" || data["type"] != "message" {
		t.Fatalf("data = %v", data)
	}
	if g.messages[0]["android"].(map[string]any)["collapse_key"] != "default" {
		t.Fatalf("no collapse key: %v", g.messages[0])
	}
	d, _ := st.Device(ctx, "phone")
	if d.LastPushedCursor != 7 {
		t.Fatalf("last_pushed_cursor = %d", d.LastPushedCursor)
	}
	if d, _ := st.Device(ctx, "old"); d.FCMToken != "" {
		t.Fatal("an UNREGISTERED token was kept")
	}
	// The OAuth2 token is cached across sends.
	p.Enqueue(ctx, "phone", Note{Body: "third", Cursor: 9, Collapse: "other"})
	p.SendDue(ctx)
	if g.tokens != 1 {
		t.Fatalf("minted %d tokens, want 1 cached", g.tokens)
	}
}

func TestFailedPushIsRetriedWithBackoff(t *testing.T) {
	g := newFakeGoogle(t)
	fcm, _ := NewFCM(serviceAccount(t, g.srv.URL+"/token"), g.srv.URL, nil)
	st := openStore(t)
	ctx := context.Background()
	st.SeeDevice(ctx, store.Device{ID: "phone", FCMToken: "tok"})
	now := time.Unix(1_000_000, 0)
	p := New(st, slog.Default(), Config{Backends: []Backend{fcm}, Now: func() time.Time { return now }})
	g.fail = 1
	p.Enqueue(ctx, "phone", Note{Body: "hi", Cursor: 3, Collapse: "default"})
	p.SendDue(ctx)
	if len(g.messages) != 0 {
		t.Fatal("sent despite the failure")
	}
	if n, _ := st.PendingPushes(ctx); n != 1 {
		t.Fatalf("%d pending after a failure, want it kept for a retry", n)
	}
	p.SendDue(ctx) // not due yet
	if len(g.messages) != 0 {
		t.Fatal("retried before the backoff")
	}
	now = now.Add(time.Minute)
	p.SendDue(ctx)
	if len(g.messages) != 1 {
		t.Fatal("not retried after the backoff")
	}
	if n, _ := st.PendingPushes(ctx); n != 0 {
		t.Fatalf("%d pending after success", n)
	}
}

func TestIDsOnlyContent(t *testing.T) {
	p := New(nil, slog.Default(), Config{Content: ContentIDs})
	n := p.redact(Note{Title: "secret title", Body: "secret body"})
	if strings.Contains(n.Title+n.Body, "secret") {
		t.Fatalf("ids-only mode leaked %+v", n)
	}
}

// TestWebPushEncryption decrypts what the browser would receive, with the
// subscription's private key (RFC 8291, aes128gcm), to prove the
// encryption is right rather than that bytes were sent.
func TestWebPushEncryption(t *testing.T) {
	uaKey, _ := ecdh.P256().GenerateKey(rand.Reader)
	auth := make([]byte, 16)
	rand.Read(auth)
	var plain []byte
	var headers http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers = r.Header
		body, _ := io.ReadAll(r.Body)
		var err error
		plain, err = decryptAES128GCM(uaKey, auth, body)
		if err != nil {
			t.Errorf("decrypting: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	pub, priv, err := GenerateVAPID()
	if err != nil {
		t.Fatal(err)
	}
	wp := &WebPush{PublicKey: pub, PrivateKey: priv, Subscriber: "mailto:ops@example.invalid"}
	// The subscription as the store hands it over, through Address.
	sub := wp.Address(store.Device{WebPush: &record.WebPush{Endpoint: srv.URL + "/push/abc", Keys: record.WebPushKeys{
		P256dh: base64.RawURLEncoding.EncodeToString(uaKey.PublicKey().Bytes()),
		Auth:   base64.RawURLEncoding.EncodeToString(auth),
	}}})
	if wp.Address(store.Device{}) != "" {
		t.Fatal("a device without a subscription has a Web Push address")
	}
	if err := wp.Send(context.Background(), sub, Note{Title: "Agent", Body: "hello ✓", ChatID: "default", Cursor: 12, Kind: "message", Collapse: "default"}); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(plain, &got); err != nil {
		t.Fatalf("decrypted payload %q: %v", plain, err)
	}
	if got["body"] != "hello ✓" || got["chat_id"] != "default" || got["cursor"] != float64(12) {
		t.Fatalf("payload = %v", got)
	}
	if !strings.HasPrefix(headers.Get("Authorization"), "vapid t=") || headers.Get("Content-Encoding") != "aes128gcm" || headers.Get("Topic") != "default" {
		t.Fatalf("headers = %v", headers)
	}
}

// decryptAES128GCM is the receiving side of RFC 8291 / RFC 8188.
func decryptAES128GCM(ua *ecdh.PrivateKey, authSecret, body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, io.ErrUnexpectedEOF
	}
	salt := body[:16]
	rs := binary.BigEndian.Uint32(body[16:20])
	idlen := int(body[20])
	asPub := body[21 : 21+idlen]
	ct := body[21+idlen:]
	_ = rs
	asKey, err := ecdh.P256().NewPublicKey(asPub)
	if err != nil {
		return nil, err
	}
	shared, err := ua.ECDH(asKey)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), ua.PublicKey().Bytes()...), asPub...)
	ikm := make([]byte, 32)
	io.ReadFull(hkdf.New(sha256.New, shared, authSecret, info), ikm)
	cek := make([]byte, 16)
	io.ReadFull(hkdf.New(sha256.New, ikm, salt, []byte("Content-Encoding: aes128gcm\x00")), cek)
	nonce := make([]byte, 12)
	io.ReadFull(hkdf.New(sha256.New, ikm, salt, []byte("Content-Encoding: nonce\x00")), nonce)
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, err
	}
	// Strip the padding delimiter (0x02 for the last record) and padding.
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 || plain[i] != 2 {
		return nil, io.ErrUnexpectedEOF
	}
	return plain[:i], nil
}

// TestPushQueueSurvivesRestart: a push whose backend fails is kept in the
// store, not in memory: a gateway started again on the same data sends it
// once its backoff is over, and the device's last_pushed_cursor follows.
func TestPushQueueSurvivesRestart(t *testing.T) {
	nt := fakentfy.New(t)
	path := filepath.Join(t.TempDir(), "p.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st.SeeDevice(ctx, store.Device{ID: "phone", NtfyTopic: "phone-topic"})
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	backends := []Backend{&Ntfy{Server: nt.URL}}
	nt.Set(func(s *fakentfy.Server) { s.FailNext = []int{500} })
	p := New(st, slog.Default(), Config{Backends: backends, Content: ContentFull, Now: clock})
	p.Enqueue(ctx, "phone", Note{Title: "Agent", Body: "while you were away", ChatID: "default", Cursor: 42, Kind: "message", Collapse: "default"})
	p.SendDue(ctx)
	if n, _ := st.PendingPushes(ctx); n != 1 || len(bodies(nt)) != 0 {
		t.Fatalf("after a failure: %d pending, %d sent; want it queued for a retry", n, len(bodies(nt)))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The gateway restarts; the backend works again.
	st, err = store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p = New(st, slog.Default(), Config{Backends: backends, Content: ContentFull, Now: clock})
	p.SendDue(ctx)
	if len(bodies(nt)) != 0 {
		t.Fatal("retried before its backoff was over")
	}
	now = now.Add(time.Minute)
	p.SendDue(ctx)
	if got := bodies(nt); len(got) != 1 || got[0] != "while you were away" {
		t.Fatalf("after the restart the backend got %q, want the queued push once", got)
	}
	if n, _ := st.PendingPushes(ctx); n != 0 {
		t.Fatalf("%d pending after it was sent", n)
	}
	if d, _ := st.Device(ctx, "phone"); d.LastPushedCursor != 42 {
		t.Fatalf("last_pushed_cursor = %d, want 42", d.LastPushedCursor)
	}
}

// TestPushToADeviceBackOnlineIsDropped: only devices that are away are
// woken. A push still queued when its device reconnects is dropped
// unsent, and last_pushed_cursor stays where it was: the device gets the
// frame from sync and must notify for it itself.
func TestPushToADeviceBackOnlineIsDropped(t *testing.T) {
	nt := fakentfy.New(t)
	st := openStore(t)
	ctx := context.Background()
	st.SeeDevice(ctx, store.Device{ID: "phone", NtfyTopic: "phone-topic"})
	var mu sync.Mutex
	online := map[string]bool{}
	p := New(st, slog.Default(), Config{Backends: []Backend{&Ntfy{Server: nt.URL}}, Online: func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		return online[id]
	}})
	p.Enqueue(ctx, "phone", Note{Body: "first", Cursor: 5, Collapse: "default"})
	mu.Lock()
	online["phone"] = true
	mu.Unlock()
	p.SendDue(ctx)
	if got := bodies(nt); len(got) != 0 {
		t.Fatalf("pushed %q to a device that is online", got)
	}
	if n, _ := st.PendingPushes(ctx); n != 0 {
		t.Fatalf("%d pushes kept for a device that is online", n)
	}
	if d, _ := st.Device(ctx, "phone"); d.LastPushedCursor != 0 {
		t.Fatalf("last_pushed_cursor = %d for a push never sent", d.LastPushedCursor)
	}
	// Away again: it is woken.
	mu.Lock()
	online["phone"] = false
	mu.Unlock()
	p.Enqueue(ctx, "phone", Note{Body: "second", Cursor: 8, Collapse: "default"})
	p.SendDue(ctx)
	if got := bodies(nt); len(got) != 1 || got[0] != "second" {
		t.Fatalf("sent %q, want the second push", got)
	}
}

// FCM answers that can never succeed are not retried: a token of another
// project or one FCM cannot parse is dropped; a refused message keeps the
// token. Credentials FCM refuses and its quota are retried (issue 14
// item 8), the credentials said once with the fix; each is counted.
func TestFCMPermanentAnswers(t *testing.T) {
	g := newFakeGoogle(t)
	fcm, err := NewFCM(serviceAccount(t, g.srv.URL+"/token"), g.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	ctx := context.Background()
	answers := map[string]string{"other-project": "SENDER_ID_MISMATCH", "garbled": "BAD_TOKEN", "refused": "BAD_MESSAGE",
		"apns": "THIRD_PARTY_AUTH_ERROR", "denied": "PERMISSION_DENIED", "quota": "QUOTA_EXCEEDED"}
	for dev, answer := range answers {
		st.SeeDevice(ctx, store.Device{ID: dev, FCMToken: "tok-" + dev})
		g.answers["tok-"+dev] = answer
	}
	l := &logs{}
	p := New(st, l.logger(), Config{Backends: []Backend{fcm}, Content: ContentFull})
	for dev := range answers {
		p.Enqueue(ctx, dev, Note{Title: "Agent", Body: "x", ChatID: "default", Cursor: 3, Kind: "message", Collapse: "default"})
	}
	p.SendDue(ctx)
	for outcome, n := range map[string]float64{"gone": 2, "refused": 1, "auth": 2, "rate_limited": 1} {
		if got := counted(p, "fcm", outcome); got != n {
			t.Errorf("irisgate_push_total{fcm,%s} = %v, want %v", outcome, got, n)
		}
	}
	if n := strings.Count(l.String(), "--fcm-service-account"); n != 1 {
		t.Errorf("the credentials' fix said %d times:\n%s", n, l)
	}
	for dev, kept := range map[string]bool{"other-project": false, "garbled": false, "refused": true, "apns": true, "denied": true, "quota": true} {
		d, _ := st.Device(ctx, dev)
		if (d.FCMToken != "") != kept {
			t.Errorf("%s: token %q, want kept %v", dev, d.FCMToken, kept)
		}
		if d.LastPushedCursor != 0 {
			t.Errorf("%s: last_pushed_cursor %d for a push never sent", dev, d.LastPushedCursor)
		}
	}
	if n, err := st.PendingPushes(ctx); err != nil || n != 3 {
		t.Fatalf("%d pushes left to retry (%v), want the three that may pass later", n, err)
	}
}

// A service-account key Google no longer accepts is a credentials
// failure with its fix, not a passing error.
func TestFCMRevokedKey(t *testing.T) {
	g := newFakeGoogle(t)
	g.revoked = true
	fcm, err := NewFCM(serviceAccount(t, g.srv.URL+"/token"), g.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = fcm.Send(context.Background(), "tok", Note{Kind: KindMessage, Collapse: "default"})
	if Outcome(err) != "auth" || !strings.Contains(err.Error(), "invalid_grant") || !strings.Contains(err.Error(), "--fcm-service-account") {
		t.Fatalf("revoked key: %v (%s)", err, Outcome(err))
	}
}

// bodies are the texts the ntfy server took, in order.
func bodies(nt *fakentfy.Server) []string {
	var out []string
	for _, m := range nt.Messages() {
		out = append(out, m.Body)
	}
	return out
}
