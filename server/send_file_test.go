package server_test

// POST /api/send with files: multipart bodies streamed into the media
// store and posted as one message that every dialect shows, over a real
// loopback gateway.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/server"
)

// formPart is a field (no filename) or a file of a multipart body.
type formPart struct {
	name, filename, contentType string
	data                        []byte
}

func field(name, value string) formPart { return formPart{name: name, data: []byte(value)} }

func file(filename, contentType string, data []byte) formPart {
	return formPart{name: "file", filename: filename, contentType: contentType, data: data}
}

type sendAnswer struct {
	status    int
	MessageID string `json:"message_id"`
	ChatID    string `json:"chat_id"`
	ThreadID  string `json:"thread_id"`
	Media     []struct {
		MediaID  string `json:"media_id"`
		Filename string `json:"filename"`
		Kind     string `json:"kind"`
		Size     int64  `json:"size"`
		SHA256   string `json:"sha256"`
	} `json:"media"`
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// postForm streams a multipart body to /api/send through a pipe, as a
// client that does not know its length would, and decodes the answer.
// With hdr nil it posts over the admin socket, as irisgate send does on
// the gateway's machine; else over TCP with those headers.
func postForm(t *testing.T, g *testgw.GW, hdr map[string]string, parts ...formPart) sendAnswer {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, p := range parts {
			h := textproto.MIMEHeader{}
			disp := fmt.Sprintf(`form-data; name=%q`, p.name)
			if p.filename != "" {
				disp += fmt.Sprintf(`; filename=%q`, p.filename)
			}
			h.Set("Content-Disposition", disp)
			if p.contentType != "" {
				h.Set("Content-Type", p.contentType)
			}
			w, err := mw.CreatePart(h)
			if err == nil {
				_, err = w.Write(p.data)
			}
			if err != nil {
				pw.CloseWithError(err) // the gateway stopped reading
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/api/send", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hc := http.DefaultClient
	if hdr == nil {
		hc = localHTTP(g)
	}
	res, err := hc.Do(req)
	pr.Close()
	if err != nil {
		t.Fatalf("POST /api/send: %v", err)
	}
	defer res.Body.Close()
	var a sendAnswer
	if err := json.NewDecoder(res.Body).Decode(&a); err != nil {
		t.Fatalf("answer %s: %v", res.Status, err)
	}
	a.status = res.StatusCode
	return a
}

func (a sendAnswer) wantError(t *testing.T, status int, code, msg string) {
	t.Helper()
	if a.status != status || a.Error.Code != code || !strings.Contains(a.Error.Message, msg) {
		t.Fatalf("answer %d %+v, want %d %s containing %q", a.status, a.Error, status, code, msg)
	}
}

func TestSendFileReachesIrisDevices(t *testing.T) {
	g := testgw.Start(t, mediaLimits(media.Limits{MaxSize: testMax}))
	laptop := g.Dial(t, "laptop")
	tablet := g.Dial(t, "tablet")
	report, chart := blob(testMax, 7), blob(70_001, 8)
	a := postForm(t, g, nil, field("chat_id", "default"), field("text", "Nightly report"),
		file("report.bin", "", report), file("chart.png", "image/png", chart))
	if a.status != http.StatusOK || !strings.HasPrefix(a.MessageID, "m_") || a.ChatID != "default" || len(a.Media) != 2 {
		t.Fatalf("answer %+v", a)
	}
	if a.Media[0].SHA256 != sum(report) || a.Media[1].SHA256 != sum(chart) || a.Media[1].Kind != "image" {
		t.Fatalf("stored %+v", a.Media)
	}
	for _, d := range []*testgw.Device{laptop, tablet} {
		m := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == a.MessageID })
		if testgw.Str(t, m, "role") != "cron" || testgw.Str(t, m, "text") != "Nightly report" || m.ChatID != "default" {
			t.Fatalf("%s got %s", d.ID, m.Raw)
		}
		ms := mediaOf(t, m)
		if len(ms) != 2 || ms[0].Filename != "report.bin" || ms[0].Kind != "document" || ms[0].Size != testMax ||
			ms[1].Filename != "chart.png" || ms[1].Mime != "image/png" || ms[1].Kind != "image" || ms[1].MediaID != a.Media[1].MediaID {
			t.Fatalf("%s: media %+v", d.ID, ms)
		}
		n := d.Expect("notification", nil)
		if testgw.Str(t, n, "kind") != "cron" || testgw.Str(t, n, "body") != "Nightly report" {
			t.Fatalf("notification %s", n.Raw)
		}
	}
	for i, want := range [][]byte{report, chart} {
		hdr, data, err := pull(t, tablet, a.Media[i].MediaID)
		if err != nil {
			t.Fatal(err)
		}
		if sum(data) != sum(want) || hdr.SHA256 != sum(want) {
			t.Fatalf("pulled %d bytes hashing to %s, want %s", len(data), sum(data), sum(want))
		}
	}
	// It stays in history with its files, for a device that was away.
	h := laptop.MustDo("history", def, map[string]any{})
	var page struct {
		Messages []struct {
			MessageID string      `json:"message_id"`
			Media     []mediaItem `json:"media"`
		} `json:"messages"`
	}
	h.Decode(&page)
	if len(page.Messages) != 1 || page.Messages[0].MessageID != a.MessageID || len(page.Messages[0].Media) != 2 {
		t.Fatalf("history %s", h.Raw)
	}

	// Without a caption, into a thread; the notification names the file.
	th := createChannel(t, laptop, "reports", "default")
	tiny := []byte("just a line\n")
	b := postForm(t, g, nil, field("chat_id", "default"), field("thread_id", th.ChatID), file("notes.txt", "", tiny))
	if b.status != http.StatusOK || b.ThreadID != th.ChatID {
		t.Fatalf("answer %+v", b)
	}
	m := laptop.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == b.MessageID })
	if ms := mediaOf(t, m); m.ThreadID != th.ChatID || len(ms) != 1 || ms[0].Mime != "text/plain" || ms[0].Size != int64(len(tiny)) {
		t.Fatalf("message %s", m.Raw)
	}
	if _, ok := testgw.P(t, m)["text"]; ok && testgw.Str(t, m, "text") != "" {
		t.Fatalf("a caption appeared: %s", m.Raw)
	}
	if n := laptop.Expect("notification", nil); testgw.Str(t, n, "body") != "📎 notes.txt" {
		t.Fatalf("notification %s", n.Raw)
	}
	// A form with text only is a text delivery.
	c := postForm(t, g, nil, field("chat_id", "default"), field("text", "no file today"))
	if c.status != http.StatusOK || len(c.Media) != 0 {
		t.Fatalf("answer %+v", c)
	}
	laptop.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "no file today" })
}

func TestSendFileRefusalsLeaveNothing(t *testing.T) {
	g := testgw.Start(t, mediaLimits(media.Limits{MaxSize: testMax}), func(c *server.AppConfig) {
		c.Server.Mobile.DeliverTokens = []string{"deliver-secret"}
	})
	d := g.Dial(t, "laptop")
	ok := blob(1000, 1)
	check := func(what string) {
		t.Helper()
		if left := stored(t, g); len(left) != 0 {
			t.Fatalf("%s left files behind: %v", what, left)
		}
	}

	// Too large: refused as the bytes pass the limit, the partial file
	// removed, and so is the file before it in the same request.
	postForm(t, g, nil, field("chat_id", "default"), file("big.bin", "", blob(1<<20, 2))).
		wantError(t, http.StatusRequestEntityTooLarge, "media_too_large", "larger than this gateway's limit")
	check("a file past the limit")
	postForm(t, g, nil, field("chat_id", "default"), file("ok.bin", "", ok), file("big.bin", "", blob(testMax+1, 3))).
		wantError(t, http.StatusRequestEntityTooLarge, "media_too_large", `"big.bin"`)
	check("a second file past the limit")

	// A bad target is refused before anything is stored.
	postForm(t, g, nil, field("chat_id", "chan_nope"), file("ok.bin", "", ok)).
		wantError(t, http.StatusNotFound, "not_found", "chan_nope")
	postForm(t, g, nil, field("chat_id", "default"), field("thread_id", "t_nope"), file("ok.bin", "", ok)).
		wantError(t, http.StatusNotFound, "not_found", "t_nope")
	postForm(t, g, nil, file("ok.bin", "", ok), field("chat_id", "default")).
		wantError(t, http.StatusBadRequest, "unsupported", "chat_id must come before the file")
	check("refused targets")
	postForm(t, g, nil, field("chat_id", "default"), field("text", "\xff\xfe"), file("ok.bin", "", ok)).
		wantError(t, http.StatusBadRequest, "unsupported", "UTF-8")
	check("a bad caption")

	// Over TCP a delivery token is required: from loopback as from
	// behind a proxy, whatever the socket says.
	postForm(t, g, map[string]string{}, field("chat_id", "default"), file("ok.bin", "", ok)).
		wantError(t, http.StatusForbidden, "auth", "delivery token")
	fwd := map[string]string{"X-Forwarded-For": "203.0.113.9"}
	postForm(t, g, fwd, field("chat_id", "default"), file("ok.bin", "", ok)).
		wantError(t, http.StatusForbidden, "auth", "delivery token")
	fwd["Authorization"] = "Bearer wrong"
	postForm(t, g, fwd, field("chat_id", "default"), file("ok.bin", "", ok)).
		wantError(t, http.StatusForbidden, "auth", "delivery token")
	check("refused callers")
	barrier(t, d)
	none(t, "the laptop", d.Seen, is(t, "message"))

	fwd["Authorization"] = "Bearer deliver-secret"
	if a := postForm(t, g, fwd, field("chat_id", "default"), file("ok.bin", "", ok)); a.status != http.StatusOK {
		t.Fatalf("with the delivery token: %+v", a)
	}
	d.Expect("message", func(f client.Frame) bool { return len(mediaOf(t, f)) == 1 })
}

// TestSendFileReachesPhones: a file delivered into a Hermes Mobile
// phone's lane reaches the phone as media frames, as a deliver frame's
// media does.
func TestSendFileReachesPhones(t *testing.T) {
	g := mobileGW(t)
	laptop := g.Dial(t, "laptop")
	tel := connectPhone(t, g, "tel-1")
	laptop.Expect("channel.created", is(t, "channel.created", "chat_id", "mobile:tel-1"))
	pic := blob(200_000, 9)
	a := postForm(t, g, nil, field("chat_id", "mobile:tel-1"), field("text", "today's chart"), file("chart.png", "image/png", pic))
	if a.status != http.StatusOK {
		t.Fatalf("answer %+v", a)
	}
	fs := tel.files(1)
	if f := fs[0]; f.filename != "chart.png" || f.kind != "image" || f.mime != "image/png" || !bytes.Equal(f.data, pic) {
		t.Fatalf("the phone got %s %s %s, %d bytes (equal: %v)", f.filename, f.kind, f.mime, len(f.data), bytes.Equal(f.data, pic))
	}
	if got := tel.finalText("today's chart"); got != "today's chart" {
		t.Fatalf("caption %q", got)
	}
	laptop.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == a.MessageID })
}

// TestSendFileSenderGoesAway: a sender that stops halfway through a file
// leaves nothing behind once its connection ends.
func TestSendFileSenderGoesAway(t *testing.T) {
	g := testgw.Start(t, mediaLimits(media.Limits{MaxSize: testMax}))
	conn, err := net.Dial("unix", g.App.AdminSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("chat_id", "default")
	w, _ := mw.CreateFormFile("file", "half.bin")
	w.Write(blob(100_000, 4))
	fmt.Fprintf(conn, "POST /api/send HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		g.Addr, mw.FormDataContentType(), body.Len()+200_000)
	if _, err := conn.Write(body.Bytes()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the partial file to appear", func() bool { return len(stored(t, g)) == 1 })
	conn.Close()
	eventually(t, "the partial file to go", func() bool { return len(stored(t, g)) == 0 })
}
