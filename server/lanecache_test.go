package server_test

import (
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// Issue 17: sends resolve their lane from the gateway's directory in
// memory, not from the store; every change of the directory is seen by
// the very next send (a device acts on a change as soon as it hears of
// it).
func TestDirectoryChangesReachTheNextSend(t *testing.T) {
	g := testgw.Start(t, parkedAgent)
	a := g.Dial(t, "phone")
	send(t, a, client.Lane{}, "loads the directory") // from here on it is held

	c := createChannel(t, a, "Work", "")
	lane := client.Lane{ChatID: c.ChatID}
	send(t, a, lane, "created, and at once sendable")
	th := createChannel(t, a, "Plans", c.ChatID)
	thread := client.Lane{ChatID: c.ChatID, ThreadID: th.ChatID}
	send(t, a, thread, "into the new thread")

	a.MustDo("channel.rename", lane, map[string]any{"name": "Jobs"})
	a.MustDo("channel.set_automation", lane, map[string]any{"on": true})
	_, err := a.Do("message.send", lane, map[string]any{"text": "refused"})
	wantCode(t, err, "unsupported")
	if !strings.Contains(err.Error(), `"Jobs"`) {
		t.Fatalf("the refusal does not name the channel by its new name: %v", err)
	}
	a.MustDo("channel.set_automation", lane, map[string]any{"on": false})
	send(t, a, lane, "automation off again")

	// A send without a chat goes to the default channel, wherever the
	// default moves.
	a.MustDo("channel.set_default", lane, nil)
	if echo := a.MustDo("message.send", client.Lane{}, map[string]any{"text": "to the default"}); echo.ChatID != c.ChatID {
		t.Fatalf("a send without chat_id went to %q, want the new default %q", echo.ChatID, c.ChatID)
	}
	// The former default lost its flag with the move: it opens no
	// auto-thread (only the default channel does).
	if echo := a.MustDo("message.send", client.Lane{ChatID: "default"}, map[string]any{"text": "no thread here", "auto_thread": true}); echo.ThreadID != "" {
		t.Fatalf("the former default opened an auto-thread: %s", echo.Raw)
	}
	a.MustDo("channel.set_default", client.Lane{ChatID: "default"}, nil)
	if echo := a.MustDo("message.send", client.Lane{}, map[string]any{"text": "back"}); echo.ChatID != "default" {
		t.Fatalf("a send without chat_id went to %q, want default", echo.ChatID)
	}

	// An auto-thread is created by the send itself; the next send finds it.
	echo := a.MustDo("message.send", client.Lane{ChatID: "default"}, map[string]any{"text": "Open a thread", "auto_thread": true})
	if echo.ThreadID == "" {
		t.Fatalf("no auto-thread: %s", echo.Raw)
	}
	send(t, a, client.Lane{ChatID: "default", ThreadID: echo.ThreadID}, "into the auto-thread")

	// Deleted with its thread: both are unknown to the next send.
	a.MustDo("channel.delete", lane, nil)
	_, err = a.Do("message.send", lane, map[string]any{"text": "gone"})
	wantCode(t, err, "not_found")
	_, err = a.Do("message.send", thread, map[string]any{"text": "gone too"})
	wantCode(t, err, "not_found")
	// And a thread's id is no chat.
	_, err = a.Do("message.send", client.Lane{ChatID: echo.ThreadID}, map[string]any{"text": "a thread as a chat"})
	wantCode(t, err, "not_found")
	if !strings.Contains(err.Error(), "is a thread") {
		t.Fatalf("err = %v, want the chat-is-a-thread refusal", err)
	}
}
