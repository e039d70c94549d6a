package server_test

import (
	"context"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// A JSON escape of half a UTF-16 surrogate pair ("\ud83d") is no
// character: encoding/json would store it as U+FFFD, what the device never
// wrote. It is refused like invalid UTF-8, in both dialects; a whole pair
// is the character it encodes. (Before, the lone half was stored as
// U+FFFD.)
func TestLoneSurrogateEscapesAreRefused(t *testing.T) {
	g := mobileGW(t)
	a := g.Dial(t, "phone")
	if err := a.SendRaw(context.Background(), []byte(`{"v":1,"id":7,"type":"message.send","chat_id":"default","payload":{"text":"half \ud83d a smile"}}`), false); err != nil {
		t.Fatal(err)
	}
	f := a.Expect("error", nil)
	if f.ID != 7 || testgw.Str(t, f, "code") != "unsupported" {
		t.Fatalf("answered %s", f.Raw)
	}
	if err := a.SendRaw(context.Background(), []byte(`{"v":1,"id":8,"type":"message.send","chat_id":"default","payload":{"text":"a whole \ud83d\ude00"}}`), false); err != nil {
		t.Fatal(err)
	}
	m := a.Expect("message", func(f client.Frame) bool { return f.ID == 8 })
	if got := testgw.Str(t, m, "text"); got != "a whole 😀" {
		t.Fatalf("stored %q", got)
	}
	h, err := history(t, a, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h.Messages {
		if m.Role == "user" && m.Text != "a whole 😀" {
			t.Fatalf("stored %q", m.Text)
		}
	}
	p := connectPhone(t, g, "tel-1")
	p.sendRaw(1, []byte(`{"t":"text","id":"m1","text":"half \udc00"}`))
	if e := p.expect("error", nil); e.S("code") != "bad_frame" {
		t.Fatalf("the phone's lone surrogate: %v", e)
	}
	p.send(map[string]any{"t": "ping", "ts": 1})
	p.expect("pong", nil)
}
