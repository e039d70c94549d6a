package gateway

import (
	"testing"

	"github.com/irisgate/irisgate/core"
)

// TestWakes: which committed events wake a device that is away, and what
// the push says. A final assistant message, a cron message, a
// notification and the agent's approvals and questions do; the stream,
// the person's own words, the gateway's system lines, a command's menu
// and anything not in the outbox (cursor 0) do not. Pushes collapse per
// lane.
func TestWakes(t *testing.T) {
	lane := core.Lane{ChatID: "chan_1"}
	thread := core.Lane{ChatID: "chan_1", ThreadID: "t_1"}
	msg := func(role, text string, media ...core.Media) *core.Message {
		return &core.Message{ID: "m_1", Role: role, Text: text, Media: media}
	}
	cronPost := func(text string) *core.Message {
		m := msg(core.RoleCron, text)
		m.Model = "cron: standup"
		return m
	}
	channels := map[string]string{"chan_1": "Inbox"}
	channel := func(id string) string { return channels[id] }
	titles := map[string]string{"cron post": "standup", "delivery": "Inbox", "delivered file": "Inbox"}
	file := core.Media{ID: "md_1", Filename: "chart.png"}
	for _, tc := range []struct {
		name       string
		ev         *core.Event
		kind, body string // kind "": no push
	}{
		{"final assistant message", &core.Event{Type: core.EvMessageStop, Message: msg(core.RoleAssistant, "All done.")}, "message", "All done."},
		{"final reply of a file alone", &core.Event{Type: core.EvMessageStop, Message: msg(core.RoleAssistant, "", file)}, "message", "📎 chart.png"},
		{"empty final reply", &core.Event{Type: core.EvMessageStop, Message: msg(core.RoleAssistant, "  ")}, "", ""},
		{"assistant message", &core.Event{Type: core.EvMessage, Message: msg(core.RoleAssistant, "Here.")}, "message", "Here."},
		// A cron post is titled with its job, a delivery (no job) with
		// its channel, as their notifications are.
		{"cron post", &core.Event{Type: core.EvMessage, Message: cronPost("Standup time")}, "cron", "Standup time"},
		{"delivery", &core.Event{Type: core.EvMessage, Message: msg(core.RoleCron, "Backup done")}, "cron", "Backup done"},
		{"delivered file", &core.Event{Type: core.EvMessage, Message: msg(core.RoleCron, "", file)}, "cron", "📎 chart.png"},
		{"the person's own message", &core.Event{Type: core.EvMessage, Message: msg(core.RoleUser, "hi")}, "", ""},
		{"a system line", &core.Event{Type: core.EvMessage, Message: msg(core.RoleSystem, "Kept the session")}, "", ""},
		// A cron post's or a delivery's notification keeps the cron kind
		// (its tag) and its title, the job's or the channel's name.
		{"cron notification", &core.Event{Type: core.EvNotification, Notification: &core.Notification{Kind: "cron", Title: "digest", Body: "3 items"}}, "cron", "3 items"},
		{"other notification", &core.Event{Type: core.EvNotification, Notification: &core.Notification{Kind: "info", Title: "note", Body: "fyi"}}, "notification", "fyi"},
		// The notification of an approval or a question is as urgent as
		// its picker: merged with it, it must not lower its priority.
		{"approval notification", &core.Event{Type: core.EvNotification, Notification: &core.Notification{Kind: "approval", Title: "Run?", Body: "make deploy"}}, "picker", "make deploy"},
		{"clarify notification", &core.Event{Type: core.EvNotification, Notification: &core.Notification{Kind: "clarify", Title: "Which?", Body: "Which?"}}, "picker", "Which?"},
		{"approval picker", &core.Event{Type: core.EvPicker, Picker: &core.Picker{ID: "pc_1", Kind: "approval", Title: "Run?", Command: "make deploy"}}, "picker", "make deploy"},
		{"clarify picker", &core.Event{Type: core.EvPicker, Picker: &core.Picker{ID: "pc_2", Kind: "clarify", Title: "Which?"}}, "picker", "Your answer is needed"},
		// Issue 14 item 10: a menu a device opened for itself with a
		// command (/reasoning, /fast, /model, /new) wakes nobody.
		{"/reasoning picker", &core.Event{Type: core.EvPicker, Picker: &core.Picker{ID: "pc_3", Kind: "choice", Title: "Reasoning effort"}}, "", ""},
		{"/model picker", &core.Event{Type: core.EvPicker, Picker: &core.Picker{ID: "pc_4", Kind: "model", Title: "Model"}}, "", ""},
		{"/new confirm", &core.Event{Type: core.EvPicker, Picker: &core.Picker{ID: "pc_5", Kind: "confirm", Title: "Start a new session?"}}, "", ""},
		{"stream update", &core.Event{Type: core.EvMessageUpdate, Text: "partial"}, "", ""},
		{"agent idle", &core.Event{Type: core.EvAgentIdle}, "", ""},
		{"tool end", &core.Event{Type: core.EvToolEnd}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			ev.Lane, ev.Cursor = lane, 41
			n, ok := wakes(ev, channel)
			if ok != (tc.kind != "") {
				t.Fatalf("wakes = %v, want %v", ok, tc.kind != "")
			}
			if !ok {
				return
			}
			if n.Kind != tc.kind || n.Body != tc.body || n.Cursor != 41 || n.ChatID != "chan_1" || n.Collapse != "chan_1" {
				t.Fatalf("note = %+v, want kind %q body %q at cursor 41, collapsed on the lane", n, tc.kind, tc.body)
			}
			if want, ok := titles[tc.name]; ok && n.Title != want {
				t.Fatalf("title %q, want %q", n.Title, want)
			}
			// A message's push names it, so the app can open it and skip it
			// when sync replays it.
			if m := tc.ev.Message; m != nil && n.MessageID != m.ID {
				t.Fatalf("note = %+v, want message_id %q", n, m.ID)
			}
			// Not in the outbox, no cursor to report: no push.
			ev.Cursor = 0
			if _, ok := wakes(ev, channel); ok {
				t.Fatal("an event without a cursor woke a device")
			}
		})
	}
	// A thread is a lane of its own: its pushes collapse apart.
	ev := &core.Event{Type: core.EvMessageStop, Lane: thread, Cursor: 7, Message: msg(core.RoleAssistant, "in the thread")}
	if n, ok := wakes(ev, channel); !ok || n.ThreadID != "t_1" || n.Collapse == "chan_1" {
		t.Fatalf("thread note = %+v %v", n, ok)
	}
}
