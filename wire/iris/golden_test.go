package iris

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/events.json from the current encoder")

// goldenEvents is an event of every type Iris has a frame for, filled and
// bare, with lane ids that need escaping.
func goldenEvents() map[string]*core.Event {
	lane := core.Lane{ChatID: "chan_<é>\"", ThreadID: "t_\u2028"}
	pct, lat, cost := 42, 1.25, 0.003
	full := &core.Message{ID: "m_1", Lane: lane, Role: core.RoleAssistant, Text: "a <b> & \"c\"\n✓", Reasoning: "why",
		Media:   []core.Media{{ID: "md_1", Kind: "image", Mime: "image/png", Size: 3, Filename: "a.png", MessageID: "m_1", SHA256: "ab", Path: "/x"}, {ID: "md_2", Size: 0}},
		ReplyTo: "m_0", Model: "gpt-5.4", Tokens: 12, Runtime: &core.Runtime{Model: "gpt-5.4", ContextPct: &pct, Cwd: "~", Latency: &lat, Cost: &cost}, TS: 1724000000000}
	bare := &core.Message{ID: "m_2", Lane: lane, Role: core.RoleUser, TS: 1}
	choices := []core.Choice{{Value: "once", Label: "Allow once", IsCurrent: true}, {Value: "no", Label: "Deny"}}
	evs := map[string]*core.Event{
		"message":                {Type: core.EvMessage, Lane: lane, Message: full},
		"message bare":           {Type: core.EvMessage, Lane: lane, Message: bare},
		"message cron":           {Type: core.EvMessage, Lane: lane, Message: &core.Message{ID: "m_3", Role: core.RoleCron, Text: "delivered", TS: 2}},
		"message.start":          {Type: core.EvMessageStart, Lane: lane, StreamID: "m_4", Role: core.RoleAssistant},
		"message.start bare":     {Type: core.EvMessageStart, Lane: lane, StreamID: "m_4"},
		"message.update":         {Type: core.EvMessageUpdate, Lane: lane, StreamID: "m_4", Text: "partial <text>"},
		"message.update empty":   {Type: core.EvMessageUpdate, Lane: lane, StreamID: "m_4"},
		"message.stop":           {Type: core.EvMessageStop, Lane: lane, Message: full},
		"message.stop bare":      {Type: core.EvMessageStop, Lane: lane, Message: bare},
		"message.deleted":        {Type: core.EvMessageDeleted, Lane: lane, MessageIDs: []string{"m_1", "m_2"}},
		"message.deleted nil":    {Type: core.EvMessageDeleted, Lane: lane},
		"commentary":             {Type: core.EvCommentary, Lane: lane, StreamID: "m_4", Text: "looking"},
		"tool.start":             {Type: core.EvToolStart, Lane: lane, Tool: &core.Tool{Index: 1, Name: "terminal", Preview: "ls", Args: map[string]any{"cmd": "ls", "n": 2}, Emoji: "💻", Note: "x", OK: true, Duration: 2, Output: "y"}},
		"tool.start bare":        {Type: core.EvToolStart, Lane: lane, Tool: &core.Tool{Name: "t"}},
		"tool.start unencodable": {Type: core.EvToolStart, Lane: lane, Tool: &core.Tool{Index: 2, Name: "t", Args: map[string]any{"c": make(chan int)}}},
		"tool.progress":          {Type: core.EvToolProgress, Lane: lane, Tool: &core.Tool{Index: 1, Name: "terminal", Note: "50%", Preview: "x", OK: true}},
		"tool.progress bare":     {Type: core.EvToolProgress, Lane: lane, Tool: &core.Tool{Index: 1, Name: "terminal"}},
		"tool.end":               {Type: core.EvToolEnd, Lane: lane, Tool: &core.Tool{Index: 1, Name: "terminal", OK: true, Duration: 0.5, Output: "ok", Preview: "x"}},
		"tool.end bare":          {Type: core.EvToolEnd, Lane: lane, Tool: &core.Tool{Index: 0, Name: "terminal"}},
		"todo.update":            {Type: core.EvTodo, Lane: lane, Todos: []core.Todo{{ID: "1", Content: "do", Status: "pending"}, {ID: "2", Content: "done", Status: "completed"}}},
		"todo.update empty":      {Type: core.EvTodo, Lane: lane},
		"typing on":              {Type: core.EvTyping, Lane: lane, On: true},
		"typing off":             {Type: core.EvTyping, Lane: lane},
		"notification":           {Type: core.EvNotification, Lane: lane, Notification: &core.Notification{Kind: "cron", Title: "Job", Body: "ran", TS: 5}},
		"channel.created":        {Type: core.EvChannelCreated, Lane: lane, Channel: &core.Channel{ChatID: "t_9", Name: "Sub", Kind: core.KindThread, ParentChatID: "default", Auto: true, Favorite: true, Icon: "iVBOR", Color: "#abcdef", Automation: true}},
		"channel.renamed":        {Type: core.EvChannelRenamed, Channel: &core.Channel{ChatID: "default", Name: "Default", Kind: core.KindDefault, IsDefault: true}},
		"channel.deleted":        {Type: core.EvChannelDeleted, Lane: lane, ChatID: "chan_2"},
		"agent.busy":             {Type: core.EvAgentBusy, Lane: lane, Reason: "tool"},
		"agent.idle":             {Type: core.EvAgentIdle, Lane: lane},
		"read.receipt":           {Type: core.EvReadReceipt, Lane: lane, MessageIDs: []string{"m_1", "m_9"}},
		"read.receipt none":      {Type: core.EvReadReceipt, Lane: lane},
		"status":                 {Type: core.EvStatus, Lane: lane, State: "restarting"},
		"media.offer":            {Type: core.EvMediaOffer, Lane: lane, Media: &core.Media{ID: "md_1", Kind: "document", Mime: "text/plain", Size: 9, Filename: "r.txt", MessageID: "m_4", SHA256: "cd"}},
		"media.offer bare":       {Type: core.EvMediaOffer, Lane: lane, Media: &core.Media{ID: "md_1"}},
		"picker.model": {Type: core.EvPicker, Lane: lane, Picker: &core.Picker{ID: "pk_1", Kind: "model", Title: "Model", CurrentModel: "a", CurrentProvider: "p",
			Providers: []core.Provider{{ID: "p", Label: "P", Models: []core.Choice{{Value: "a", Label: "A"}, {Value: "b", Label: "B"}}}, {ID: "q", Label: "Q"}}}},
		"picker.choice":       {Type: core.EvPicker, Lane: lane, Picker: &core.Picker{ID: "pk_2", Kind: "choice", Title: "Reasoning", Choices: choices}},
		"picker.clarify":      {Type: core.EvPicker, Lane: lane, Picker: &core.Picker{ID: "pk_3", Kind: "clarify", Title: "Which?", Choices: choices}},
		"picker.clarify bare": {Type: core.EvPicker, Lane: lane, Picker: &core.Picker{ID: "pk_3", Kind: "clarify", Title: "Which?"}},
		"picker.approval":     {Type: core.EvPicker, Lane: lane, Picker: &core.Picker{ID: "pk_4", Kind: "approval", Title: "Run this command?", Command: "rm -rf build", Description: "cleans", Choices: choices}},
		"picker.confirm":      {Type: core.EvPicker, Lane: lane, Picker: &core.Picker{ID: "pk_5", Kind: "confirm", Title: "Start a new session?", Choices: choices}},
		"typing no lane":      {Type: core.EvTyping, On: true},
		"picker.closed":       {Type: core.EvPickerClosed, Lane: lane, Closed: &core.PickerClosed{ID: "pk_1"}},
	}
	return evs
}

type goldenFrames struct {
	Broadcast string `json:"broadcast"`
	Reply     string `json:"reply"`
	Replay    string `json:"replay"`
}

func encodeGolden() map[string]goldenFrames {
	out := map[string]goldenFrames{}
	for name, ev := range goldenEvents() {
		out[name] = goldenFrames{
			Broadcast: string(encodeEvent(ev, 0, 0)),
			Reply:     string(encodeEvent(ev, 7, 0)),
			Replay:    string(withCursor(encodeEvent(ev, 0, 0), 1042)),
		}
	}
	for name, e := range map[string]*core.Error{
		"error":           core.Errorf(core.CodeNotFound, "no channel <%s>", "chan_x"),
		"error forbidden": core.Errorf(core.CodeForbidden, "not yours"),
	} {
		out[name] = goldenFrames{Broadcast: string(errorFrame(0, e)), Reply: string(errorFrame(7, e))}
	}
	return out
}

// TestEncodeEventBytesUnchanged compares every event's frames, live, as a
// reply and as sync replays them, with those the encoder wrote before
// proto/irisv1 (testdata/golden/events.json, written by main at b84ad07
// with -update). Fan-out sends these bytes to every device, and the encode
// cache and SpliceCursor rely on them.
func TestEncodeEventBytesUnchanged(t *testing.T) {
	path := filepath.Join("testdata", "golden", "events.json")
	got := encodeGolden()
	if *update {
		b, _ := json.MarshalIndent(got, "", "  ")
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]goldenFrames
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, ok := want[n]
		if !ok {
			t.Errorf("%s: no golden frames", n)
			continue
		}
		if got[n] != w {
			t.Errorf("%s:\n got %+v\nwant %+v", n, got[n], w)
		}
	}
}

// TestPickerFramesKeepRequiredMembers: where the old encoder left out a
// member the schema requires because it was empty (a model picker without
// providers, a choice, approval or confirm picker without choices), the
// frame now carries it empty, so it validates. A kind Iris has no frame
// for is not sent rather than sent as a type no app knows.
func TestPickerFramesKeepRequiredMembers(t *testing.T) {
	v := schemaFor(t)
	for kind, want := range map[string]string{
		"model":    `"providers":[]`,
		"choice":   `"choices":[]`,
		"approval": `"choices":[]`,
		"confirm":  `"choices":[]`,
	} {
		f := encodeEvent(&core.Event{Type: core.EvPicker, Lane: core.Lane{ChatID: "default"}, Picker: &core.Picker{ID: "pk", Kind: kind}}, 0, 0)
		if err := v.Server(f); err != nil || !strings.Contains(string(f), want) {
			t.Errorf("picker.%s: %s (%v); want it valid, with %s", kind, f, err, want)
		}
	}
	if f := encodeEvent(&core.Event{Type: core.EvPicker, Picker: &core.Picker{ID: "pk", Kind: "wheel"}}, 0, 0); f != nil {
		t.Errorf("picker.wheel was encoded: %s", f)
	}
}
