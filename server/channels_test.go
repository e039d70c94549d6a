package server_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// broadcast asserts that a directory change answering req reached the
// requester with its id and every other device without one, all with
// the same payload.
func broadcast(t *testing.T, req client.Frame, others ...*testgw.Device) {
	t.Helper()
	if req.ID == 0 {
		t.Fatalf("reply without the request id: %s", req.Raw)
	}
	for _, d := range others {
		f := d.Expect(req.Type, func(f client.Frame) bool { return bytes.Equal(f.Payload, req.Payload) })
		if f.ID != 0 {
			t.Errorf("device %s got another device's reply id: %s", d.ID, f.Raw)
		}
	}
}

func TestChannelList(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	cs := channels(t, a)
	if len(cs) != 1 || cs[0].ChatID != "default" || !cs[0].IsDefault || cs[0].Kind != "default" {
		t.Fatalf("directory = %+v, want the default channel alone", cs)
	}
	c := createChannel(t, a, "Reports", "")
	th := createChannel(t, a, "Q3", c.ChatID)
	cs = channels(t, a)
	if len(cs) != 3 {
		t.Fatalf("directory = %+v, want default, channel, thread", cs)
	}
	if _, ok := findChan(cs, th.ChatID); !ok {
		t.Fatalf("thread %s missing from %+v", th.ChatID, cs)
	}
}

func TestChannelCreate(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	parent := createChannel(t, a, "Projects", "")
	thread := createChannel(t, a, "Roadmap", parent.ChatID)
	b.Expect("channel.created", is(t, "channel.created", "chat_id", thread.ChatID))

	for _, tc := range []struct {
		name    string
		payload map[string]any
		code    string // empty: created
		kind    string
		parent  string
	}{
		{"channel", map[string]any{"name": "Cron Reports", "kind": "channel"}, "", "channel", ""},
		{"channel without kind", map[string]any{"name": "Notes"}, "", "channel", ""},
		{"channel with null parent", map[string]any{"name": "Inbox", "kind": "channel", "parent_chat_id": nil}, "", "channel", ""},
		{"thread in a channel", map[string]any{"name": "Ideas", "kind": "thread", "parent_chat_id": parent.ChatID}, "", "thread", parent.ChatID},
		{"thread in the default channel", map[string]any{"name": "Side talk", "kind": "thread", "parent_chat_id": "default"}, "", "thread", "default"},
		{"thread without parent", map[string]any{"name": "Lost", "kind": "thread"}, "not_found", "", ""},
		{"thread in an unknown channel", map[string]any{"name": "Lost", "kind": "thread", "parent_chat_id": "chan_nope"}, "not_found", "", ""},
		{"thread in a thread", map[string]any{"name": "Nested", "kind": "thread", "parent_chat_id": thread.ChatID}, "unsupported", "", ""},
		{"channel with a parent", map[string]any{"name": "Odd", "kind": "channel", "parent_chat_id": parent.ChatID}, "unsupported", "", ""},
		{"unknown kind", map[string]any{"name": "Odd", "kind": "folder"}, "unsupported", "", ""},
		{"empty name", map[string]any{"name": "  ", "kind": "channel"}, "unsupported", "", ""},
		{"no name", map[string]any{"kind": "channel"}, "unsupported", "", ""},
		{"name too long", map[string]any{"name": strings.Repeat("x", 101), "kind": "channel"}, "unsupported", "", ""},
		{"control characters", map[string]any{"name": "a\x07b", "kind": "channel"}, "unsupported", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := a.In(t), b.In(t)
			f, err := a.Do("channel.create", client.Lane{}, tc.payload)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				if f.ID == 0 {
					t.Errorf("error without the request id: %s", f.Raw)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != "channel.created" {
				t.Fatalf("reply = %s", f.Raw)
			}
			c := entry(t, f)
			if c.Kind != tc.kind || c.IsDefault || c.Auto || c.Name != tc.payload["name"] {
				t.Errorf("created %+v", c)
			}
			prefix := map[string]string{"channel": "chan_", "thread": "t_"}[tc.kind]
			if !strings.HasPrefix(c.ChatID, prefix) {
				t.Errorf("chat_id %q, want prefix %s", c.ChatID, prefix)
			}
			if got := ""; c.ParentChatID != nil {
				got = *c.ParentChatID
				if got != tc.parent {
					t.Errorf("parent_chat_id = %q, want %q", got, tc.parent)
				}
			} else if tc.parent != "" {
				t.Errorf("parent_chat_id missing, want %q", tc.parent)
			}
			broadcast(t, f, b)
			if _, ok := findChan(channels(t, a), c.ChatID); !ok {
				t.Errorf("%s not in the directory", c.ChatID)
			}
		})
	}
	// Refused creations were not broadcast.
	none(t, "tablet", barrier(t, b), func(f client.Frame) bool { return f.Type == "channel.created" })
}

func TestChannelRenameFavoriteDefault(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	c := createChannel(t, a, "Reports", "")
	lane := client.Lane{ChatID: c.ChatID}

	t.Run("rename", func(t *testing.T) {
		a, b := a.In(t), b.In(t)
		f := a.MustDo("channel.rename", lane, map[string]any{"name": "  Weekly reports "})
		if got := entry(t, f); f.Type != "channel.renamed" || got.Name != "Weekly reports" || got.ChatID != c.ChatID || got.Kind != "channel" {
			t.Fatalf("reply = %s", f.Raw)
		}
		broadcast(t, f, b)
		ch, _ := findChan(channels(t, b), c.ChatID)
		if ch.Name != "Weekly reports" {
			t.Errorf("directory has %+v", ch)
		}
	})
	t.Run("rename refused", func(t *testing.T) {
		a := a.In(t)
		_, err := a.Do("channel.rename", client.Lane{ChatID: "chan_nope"}, map[string]any{"name": "x"})
		wantCode(t, err, "not_found")
		_, err = a.Do("channel.rename", lane, map[string]any{"name": ""})
		wantCode(t, err, "unsupported")
		_, err = a.Do("channel.rename", lane, map[string]any{})
		wantCode(t, err, "unsupported")
		_, err = a.Do("channel.rename", client.Lane{}, map[string]any{"name": "x"})
		wantCode(t, err, "unsupported")
	})
	t.Run("chat_id in the payload", func(t *testing.T) {
		a, b := a.In(t), b.In(t)
		f := a.MustDo("channel.rename", client.Lane{}, map[string]any{"chat_id": c.ChatID, "name": "Reports"})
		if entry(t, f).Name != "Reports" {
			t.Fatalf("reply = %s", f.Raw)
		}
		broadcast(t, f, b)
	})
	t.Run("favorite", func(t *testing.T) {
		a, b := a.In(t), b.In(t)
		f := a.MustDo("channel.favorite", lane, map[string]any{"on": true})
		if got := entry(t, f); f.Type != "channel.renamed" || !got.Favorite || got.Name != "Reports" {
			t.Fatalf("reply = %s", f.Raw)
		}
		broadcast(t, f, b)
		if cs := channels(t, a); cs[0].ChatID != c.ChatID {
			t.Errorf("a favourite sorts first: %+v", cs)
		}
		f = a.MustDo("channel.favorite", lane, map[string]any{"on": false})
		if entry(t, f).Favorite {
			t.Fatalf("reply = %s", f.Raw)
		}
		broadcast(t, f, b)
		_, err := a.Do("channel.favorite", lane, map[string]any{})
		wantCode(t, err, "unsupported")
	})
	t.Run("set_default", func(t *testing.T) {
		a, b := a.In(t), b.In(t)
		f := a.MustDo("channel.set_default", lane, map[string]any{})
		if got := entry(t, f); f.Type != "channel.renamed" || !got.IsDefault || got.ChatID != c.ChatID {
			t.Fatalf("reply = %s", f.Raw)
		}
		broadcast(t, f, b)
		// The old default is told it no longer is one.
		for _, d := range []*testgw.Device{a, b} {
			d.Expect("channel.renamed", is(t, "channel.renamed", "chat_id", "default", "is_default", "false"))
		}
		var defaults []string
		for _, ch := range channels(t, a) {
			if ch.IsDefault {
				defaults = append(defaults, ch.ChatID)
			}
		}
		if len(defaults) != 1 || defaults[0] != c.ChatID {
			t.Fatalf("defaults = %v, want only %s", defaults, c.ChatID)
		}
		// A message without chat_id goes to the new default.
		echo := a.MustDo("message.send", client.Lane{}, map[string]any{"text": "where am I"})
		if echo.ChatID != c.ChatID {
			t.Errorf("echo chat_id = %q, want %q", echo.ChatID, c.ChatID)
		}
		a.Expect("agent.idle", nil)
		// The default channel cannot be deleted, whichever it is.
		_, err := a.Do("channel.delete", lane, nil)
		wantCode(t, err, "unsupported")
		// And back.
		f = a.MustDo("channel.set_default", client.Lane{ChatID: "default"}, nil)
		if got := entry(t, f); !got.IsDefault || got.Kind != "default" {
			t.Fatalf("reply = %s", f.Raw)
		}
		a.Expect("channel.renamed", is(t, "channel.renamed", "chat_id", c.ChatID, "is_default", "false"))
	})
	t.Run("set_default refused", func(t *testing.T) {
		a := a.In(t)
		th := createChannel(t, a, "A thread", c.ChatID)
		_, err := a.Do("channel.set_default", client.Lane{ChatID: th.ChatID}, nil)
		wantCode(t, err, "unsupported")
		_, err = a.Do("channel.set_default", client.Lane{ChatID: "chan_nope"}, nil)
		wantCode(t, err, "not_found")
	})
}

func pngBase64(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestChannelIcon(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	c := createChannel(t, a, "Reports", "")
	lane := client.Lane{ChatID: c.ChatID}
	icon := pngBase64(t)
	big := base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 512<<10)...))

	for _, tc := range []struct {
		name    string
		payload map[string]any
		code    string
		icon    *string // expected in the entry
		color   *string
	}{
		{"png and colour", map[string]any{"icon": icon, "color": "#a1b2c3"}, "", &icon, ptr("#A1B2C3")},
		{"jpeg, no colour", map[string]any{"icon": base64.StdEncoding.EncodeToString([]byte{0xff, 0xd8, 0xff, 0xe0, 0, 0x10})}, "", ptr("/9j/4AAQ"), nil},
		{"colour only", map[string]any{"color": "#000000", "icon": nil}, "", nil, ptr("#000000")},
		{"too large", map[string]any{"icon": big}, "media_too_large", nil, nil},
		{"not an image", map[string]any{"icon": base64.StdEncoding.EncodeToString([]byte("GIF89a, not really"))}, "unsupported", nil, nil},
		{"not base64", map[string]any{"icon": "%%%"}, "unsupported", nil, nil},
		{"icon not a string", map[string]any{"icon": 12}, "unsupported", nil, nil},
		{"bad colour", map[string]any{"icon": icon, "color": "red"}, "unsupported", nil, nil},
		{"colour without #", map[string]any{"color": "a1b2c3"}, "unsupported", nil, nil},
		{"null clears", map[string]any{"icon": nil, "color": nil}, "", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := a.In(t), b.In(t)
			f, err := a.Do("channel.icon", lane, tc.payload)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := entry(t, f)
			if f.Type != "channel.renamed" || got.ChatID != c.ChatID || got.Name != "Reports" {
				t.Fatalf("reply = %s", f.Raw)
			}
			if !eqPtr(got.Icon, tc.icon) || !eqPtr(got.Color, tc.color) {
				t.Errorf("icon %v color %v, want %v %v", show(got.Icon), show(got.Color), show(tc.icon), show(tc.color))
			}
			broadcast(t, f, b)
			ch, _ := findChan(channels(t, b), c.ChatID)
			if !eqPtr(ch.Icon, tc.icon) || !eqPtr(ch.Color, tc.color) {
				t.Errorf("directory has icon %v color %v", show(ch.Icon), show(ch.Color))
			}
		})
	}
	// A refused icon changed nothing and told nobody.
	none(t, "tablet", barrier(t, b), func(f client.Frame) bool { return f.Type == "channel.renamed" })
}

func ptr(s string) *string { return &s }

func eqPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func show(s *string) string {
	if s == nil {
		return "<none>"
	}
	if len(*s) > 20 {
		return (*s)[:20] + "…"
	}
	return *s
}

func TestChannelAutomation(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	c := createChannel(t, a, "Cron", "")
	th := createChannel(t, a, "Nightly", c.ChatID)
	lane := client.Lane{ChatID: c.ChatID}

	f := a.MustDo("channel.set_automation", lane, map[string]any{"on": true})
	if got := entry(t, f); f.Type != "channel.renamed" || !got.Automation {
		t.Fatalf("reply = %s", f.Raw)
	}
	broadcast(t, f, b)

	for _, l := range []client.Lane{lane, {ChatID: c.ChatID, ThreadID: th.ChatID}} {
		_, err := a.Do("message.send", l, map[string]any{"text": "hi"})
		wantCode(t, err, "unsupported")
	}
	_, err := a.Do("channel.set_automation", client.Lane{ChatID: "default"}, map[string]any{"on": true})
	wantCode(t, err, "not_found")
	_, err = a.Do("channel.set_automation", client.Lane{ChatID: th.ChatID}, map[string]any{"on": true})
	wantCode(t, err, "unsupported")
	_, err = a.Do("channel.set_default", lane, nil)
	wantCode(t, err, "unsupported")
	_, err = a.Do("channel.set_automation", lane, map[string]any{})
	wantCode(t, err, "unsupported")
	none(t, "tablet", barrier(t, b), func(f client.Frame) bool { return f.Type == "message" || f.Type == "channel.renamed" })

	f = a.MustDo("channel.set_automation", lane, map[string]any{"on": false})
	if entry(t, f).Automation {
		t.Fatalf("reply = %s", f.Raw)
	}
	broadcast(t, f, b)
	send(t, a, lane, "hi again")
	a.Expect("agent.idle", nil)
}

func TestChannelDelete(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	c := createChannel(t, a, "Reports", "")
	th := createChannel(t, a, "Q3", c.ChatID)
	other := createChannel(t, a, "Other", "")
	kept := createChannel(t, a, "Kept", other.ChatID)
	gone := createChannel(t, a, "Gone", other.ChatID)
	threadLane := client.Lane{ChatID: c.ChatID, ThreadID: th.ChatID}
	send(t, a, threadLane, "in the thread")
	a.Expect("agent.idle", func(f client.Frame) bool { return f.ThreadID == th.ChatID })

	t.Run("channel with its threads", func(t *testing.T) {
		a, b := a.In(t), b.In(t)
		f := a.MustDo("channel.delete", client.Lane{ChatID: c.ChatID}, nil)
		if f.Type != "channel.deleted" || testgw.Str(t, f, "chat_id") != c.ChatID {
			t.Fatalf("reply = %s", f.Raw)
		}
		broadcast(t, f, b)
		cs := channels(t, b)
		for _, id := range []string{c.ChatID, th.ChatID} {
			if _, ok := findChan(cs, id); ok {
				t.Errorf("%s still listed", id)
			}
		}
		_, err := history(t, a, threadLane, nil)
		wantCode(t, err, "not_found")
		_, err = a.Do("message.send", client.Lane{ChatID: c.ChatID}, map[string]any{"text": "hi"})
		wantCode(t, err, "not_found")
	})
	t.Run("one thread", func(t *testing.T) {
		a, b := a.In(t), b.In(t)
		f := a.MustDo("channel.delete", client.Lane{ChatID: gone.ChatID}, nil)
		if f.Type != "channel.deleted" || testgw.Str(t, f, "chat_id") != gone.ChatID {
			t.Fatalf("reply = %s", f.Raw)
		}
		broadcast(t, f, b)
		cs := channels(t, a)
		if _, ok := findChan(cs, gone.ChatID); ok {
			t.Errorf("%s still listed", gone.ChatID)
		}
		for _, id := range []string{other.ChatID, kept.ChatID} {
			if _, ok := findChan(cs, id); !ok {
				t.Errorf("%s was deleted with a sibling thread", id)
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		a := a.In(t)
		_, err := a.Do("channel.delete", client.Lane{ChatID: "default"}, nil)
		wantCode(t, err, "unsupported")
		_, err = a.Do("channel.delete", client.Lane{ChatID: c.ChatID}, nil)
		wantCode(t, err, "not_found")
		_, err = a.Do("channel.delete", client.Lane{}, nil)
		wantCode(t, err, "unsupported")
		if _, ok := findChan(channels(t, a), "default"); !ok {
			t.Fatal("the default channel is gone")
		}
	})
}
