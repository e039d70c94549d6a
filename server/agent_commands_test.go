package server_test

// Slash commands and their pickers end to end, with the model backend: the
// catalog and completion, the pickers a command opens and what a selection
// changes in the next request the model gets.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// allCommands are the commands the issue asks for, in /help order (the
// catalog may hold more).
var allCommands = []string{"/new", "/retry", "/undo", "/title", "/stop", "/steer", "/queue", "/model", "/reasoning", "/fast", "/yolo", "/approve", "/deny", "/cron", "/status", "/help"}

type catalogEntry struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	ArgsHint    *string   `json:"args_hint"`
	Category    string    `json:"category"`
	Aliases     *[]string `json:"aliases"`
}

// fetchCatalog asks for commands.catalog.
func fetchCatalog(t *testing.T, d *testgw.Device) []catalogEntry {
	t.Helper()
	f := d.MustDo("commands.catalog", client.Lane{}, nil)
	if f.Type != "commands.catalog" {
		t.Fatalf("answered %s", f.Raw)
	}
	var p struct {
		Commands []catalogEntry `json:"commands"`
	}
	if err := f.Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p.Commands
}

// inOrder reports whether want appears in got in the same order.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestModelCommandsCatalog: commands.catalog lists every command with its
// name, description, args_hint, category and aliases.
func TestModelCommandsCatalog(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	var names []string
	categories := map[string]bool{"Session": true, "Configuration": true, "Tools & Skills": true, "Info": true, "Exit": true, "Plugin": true}
	for _, c := range fetchCatalog(t, a) {
		names = append(names, c.Name)
		if !strings.HasPrefix(c.Name, "/") || c.Description == "" || c.ArgsHint == nil || c.Aliases == nil || !categories[c.Category] {
			t.Errorf("incomplete entry %+v", c)
		}
		switch c.Name {
		case "/new":
			if fmt.Sprint(*c.Aliases) != "[/reset]" {
				t.Errorf("/new aliases %v", *c.Aliases)
			}
		case "/model", "/title", "/steer", "/queue", "/reasoning":
			if *c.ArgsHint == "" {
				t.Errorf("%s has no args_hint", c.Name)
			}
		case "/status", "/help", "/undo":
			if *c.ArgsHint != "" {
				t.Errorf("%s args_hint %q", c.Name, *c.ArgsHint)
			}
		}
	}
	if !inOrder(names, allCommands) {
		t.Fatalf("catalog %v lacks some of %v", names, allCommands)
	}
}

// TestModelCommandsComplete: commands.complete matches by prefix first
// (names and aliases, in catalog order), then fuzzily (the letters in
// order).
func TestModelCommandsComplete(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	catalog := fetchCatalog(t, a)
	complete := func(prefix string) []string {
		t.Helper()
		f := a.MustDo("commands.complete", client.Lane{}, map[string]any{"prefix": prefix})
		var p struct {
			Prefix  string         `json:"prefix"`
			Matches []catalogEntry `json:"matches"`
		}
		if err := f.Decode(&p); err != nil || f.Type != "commands.complete" || p.Prefix != prefix || p.Matches == nil {
			t.Fatalf("answered %s (%v)", f.Raw, err)
		}
		var names []string
		for _, m := range p.Matches {
			if m.Description == "" || m.ArgsHint == nil {
				t.Errorf("match %+v", m)
			}
			names = append(names, m.Name)
		}
		return names
	}
	// byPrefix is what the catalog says a prefix must match first.
	byPrefix := func(p string) []string {
		var out []string
		for _, c := range catalog {
			for _, n := range append([]string{c.Name}, *c.Aliases...) {
				if strings.HasPrefix(n, p) {
					out = append(out, c.Name)
					break
				}
			}
		}
		return out
	}
	for _, c := range []struct {
		prefix, first string
		has           []string
	}{
		{"/mod", "/model", nil},
		{"/res", "/new", []string{"/reasoning"}},                        // an alias (/reset), then fuzzy
		{"/re", "/new", []string{"/retry", "/reasoning", "/approve"}},   // prefixes, then fuzzy
		{"/rsng", "/reasoning", nil},                                    // fuzzy: the letters in order
		{"st", "/stop", []string{"/steer", "/status", "/new", "/fast"}}, // the slash is optional
		{"/ap", "/approve", nil},
		{"/YO", "/yolo", nil}, // case does not matter
	} {
		got := complete(c.prefix)
		p := "/" + strings.ToLower(strings.TrimPrefix(c.prefix, "/"))
		want := byPrefix(p)
		if len(got) == 0 || got[0] != c.first || len(got) < len(want) || !slices.Equal(got[:len(want)], want) || !inOrder(got, c.has) {
			t.Errorf("complete(%q) = %v, want the prefix matches %v first, then %v", c.prefix, got, want, c.has)
		}
	}
	if got := complete("/zzz"); len(got) != 0 {
		t.Errorf("complete(/zzz) = %v", got)
	}
	var all []string
	for _, c := range catalog {
		all = append(all, c.Name)
	}
	if got := complete("/"); !slices.Equal(got, all) {
		t.Errorf("complete(/) = %v, want the whole catalog", got)
	}
}

// modelPicker is a picker.model payload.
type modelPicker struct {
	PickerID        string `json:"picker_id"`
	CurrentModel    string `json:"current_model"`
	CurrentProvider string `json:"current_provider"`
	Providers       []struct {
		ID     string `json:"id"`
		Label  string `json:"label"`
		Models []struct {
			ID    string `json:"id"`
			Label string `json:"label"`
		} `json:"models"`
	} `json:"providers"`
}

// TestModelModelPicker: /model opens picker.model with the configured
// providers and models; a selection switches the lane's model for the next
// request; /model provider/model and a vendor-prefixed id switch directly.
func TestModelModelPicker(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	send(t, a, def, "/model")
	f := a.Expect("picker.model", nil)
	var p modelPicker
	if err := f.Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.CurrentModel != agModel || p.CurrentProvider != "fake" || len(p.Providers) != 2 {
		t.Fatalf("picker.model %s", f.Raw)
	}
	if pr := p.Providers[0]; pr.ID != "fake" || pr.Label != "Fake AI" || len(pr.Models) != 2 || pr.Models[0].ID != agModel || pr.Models[0].Label != "Fake Model" {
		t.Fatalf("provider %+v", pr)
	}
	if pr := p.Providers[1]; pr.ID != "second" || len(pr.Models) != 1 || pr.Models[0].ID != "big-model" {
		t.Fatalf("provider %+v", pr)
	}
	ans := selectChoice(t, a, p.PickerID, "second/big-model")
	if txt := testgw.Str(t, ans, "text"); !strings.Contains(txt, "big-model") || !strings.Contains(txt, "second") {
		t.Fatalf("reply %q", txt)
	}
	r.reply("from the big one")
	if s := agStop(t, agTurn(t, a, def, "hi")); s.Model != "big-model" || s.Runtime.Model != "big-model" {
		t.Fatalf("stop %+v", s)
	}
	// The picker now shows the lane's choice.
	send(t, a, def, "/model")
	var p2 modelPicker
	if err := a.Expect("picker.model", nil).Decode(&p2); err != nil {
		t.Fatal(err)
	}
	if p2.CurrentModel != "big-model" || p2.CurrentProvider != "second" {
		t.Fatalf("current %s / %s", p2.CurrentProvider, p2.CurrentModel)
	}
	staleSelect(t, a, p.PickerID, "fake/"+agModel) // the first picker was answered
	// A model id alone picks it on the current provider…
	selectChoice(t, a, p2.PickerID, "vendor/other-model")
	r.reply("other")
	agTurn(t, a, def, "hi other")
	// …and /model with an argument switches without a picker; an id with a
	// vendor prefix that names no provider is a model of the current one.
	send(t, a, def, "/model openai/gpt-5")
	agSystemReply(t, a, "Model: openai/gpt-5")
	r.reply("from gpt-5")
	if s := agStop(t, agTurn(t, a, def, "hi gpt")); s.Model != "openai/gpt-5" || s.Runtime.Model != "gpt-5" {
		t.Fatalf("stop %+v", s)
	}
	send(t, a, def, "/model fake/"+agModel)
	agSystemReply(t, a, "Model: "+agModel)
	r.reply("back")
	agTurn(t, a, def, "hi again")
	reqs := r.requests(4)
	for i, want := range []string{"big-model", "vendor/other-model", "openai/gpt-5", agModel} {
		if reqs[i]["model"] != want {
			t.Errorf("request %d: model %v, want %s", i, reqs[i]["model"], want)
		}
	}
	// The choice is the lane's: another lane keeps the default.
	ch := createChannel(t, a, "Other", "")
	send(t, a, def, "/model second/big-model")
	agSystemReply(t, a, "big-model")
	r.reply("default here")
	agTurn(t, a, client.Lane{ChatID: ch.ChatID}, "which model?")
	if m := r.requests(5)[4]["model"]; m != agModel {
		t.Fatalf("another lane used %v", m)
	}
	// A provider alone is its first model; a listed model alone is on the
	// provider that lists it.
	lane := client.Lane{ChatID: ch.ChatID}
	send(t, a, lane, "/model fake")
	agSystemReply(t, a, "Model: "+agModel+" (provider fake)")
	send(t, a, lane, "/model big-model")
	agSystemReply(t, a, "Model: big-model (provider second)")
	send(t, a, lane, "/status")
	if s := agSystemReply(t, a, "Model:"); !strings.Contains(s, "big-model (provider second)") {
		t.Fatalf("/status %q", s)
	}
}

// TestModelReasoningPicker: /reasoning opens picker.choice; the choice is
// the reasoning_effort of the next request; none sends none.
func TestModelReasoningPicker(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	send(t, a, def, "/reasoning")
	f := a.Expect("picker.choice", nil)
	var p struct {
		PickerID string `json:"picker_id"`
		Title    string `json:"title"`
		Choices  []struct {
			Value     string `json:"value"`
			Label     string `json:"label"`
			IsCurrent bool   `json:"is_current"`
		} `json:"choices"`
	}
	if err := f.Decode(&p); err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, c := range p.Choices {
		values = append(values, c.Value)
		if c.IsCurrent != (c.Value == "show") { // no level set; reasoning shown by default
			t.Errorf("choice %+v", c)
		}
	}
	if p.Title != "Reasoning effort" || strings.Join(values, ",") != "none,minimal,low,medium,high,show,hide" {
		t.Fatalf("picker.choice %s", f.Raw)
	}
	ans := selectChoice(t, a, p.PickerID, "high")
	if !strings.Contains(testgw.Str(t, ans, "text"), "high") {
		t.Fatalf("reply %s", ans.Raw)
	}
	r.reply("thought hard")
	agTurn(t, a, def, "think")
	send(t, a, def, "/reasoning low")
	agSystemReply(t, a, "Reasoning effort: low")
	r.reply("thought a little")
	agTurn(t, a, def, "think less")
	send(t, a, def, "/reasoning none")
	agSystemReply(t, a, "Reasoning effort: none")
	r.reply("no thought")
	agTurn(t, a, def, "just answer")
	send(t, a, def, "/reasoning extreme")
	agSystemReply(t, a, "unknown level")
	reqs := r.requests(3)
	if reqs[0]["reasoning_effort"] != "high" || reqs[1]["reasoning_effort"] != "low" {
		t.Fatalf("reasoning_effort %v, %v", reqs[0]["reasoning_effort"], reqs[1]["reasoning_effort"])
	}
	if v, ok := reqs[2]["reasoning_effort"]; ok {
		t.Fatalf("none sent reasoning_effort %v", v)
	}
	// The picker marks the lane's level now.
	send(t, a, def, "/reasoning")
	if !strings.Contains(string(a.Expect("picker.choice", nil).Raw), `{"value":"none","label":"None","is_current":true}`) {
		t.Fatal("the current level is not marked")
	}
}

// TestModelFast: /fast opens picker.choice; on means minimal reasoning and
// the fast model; off goes back.
func TestModelFast(t *testing.T) {
	r := agStart(t, agWithApp(func(c *server.AppConfig) { c.FastModel = "quick-model" }))
	a := r.dial("phone")
	send(t, a, def, "/fast")
	f := a.Expect("picker.choice", nil)
	if testgw.Str(t, f, "title") != "Fast mode" || !strings.Contains(string(f.Raw), `{"value":"off","label":"Off","is_current":true}`) {
		t.Fatalf("picker %s", f.Raw)
	}
	if ans := selectChoice(t, a, testgw.Str(t, f, "picker_id"), "on"); !strings.Contains(testgw.Str(t, ans, "text"), "Fast mode on") {
		t.Fatalf("reply %s", ans.Raw)
	}
	r.reply("fast")
	if s := agStop(t, agTurn(t, a, def, "quick")); s.Model != "quick-model" {
		t.Fatalf("stop %+v", s)
	}
	send(t, a, def, "/fast off")
	agSystemReply(t, a, "Fast mode off")
	r.reply("slow")
	agTurn(t, a, def, "slow")
	reqs := r.requests(2)
	if reqs[0]["model"] != "quick-model" || reqs[0]["reasoning_effort"] != "minimal" {
		t.Fatalf("fast request: %v %v", reqs[0]["model"], reqs[0]["reasoning_effort"])
	}
	if _, ok := reqs[1]["reasoning_effort"]; reqs[1]["model"] != agModel || ok {
		t.Fatalf("after /fast off: %v %v", reqs[1]["model"], reqs[1]["reasoning_effort"])
	}
}

// TestModelStatusAndHelp: /status names the model and the reasoning
// settings; /help lists every command.
func TestModelStatusAndHelp(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	send(t, a, def, "/status")
	s := agSystemReply(t, a, "Model:")
	for _, want := range []string{agModel, "provider fake", "Reasoning: model default", "Approvals: on", "Conversation: 0 entries"} {
		if !strings.Contains(s, want) {
			t.Errorf("/status lacks %q: %q", want, s)
		}
	}
	send(t, a, def, "/reasoning high")
	agSystemReply(t, a, "Reasoning effort")
	send(t, a, def, "/yolo")
	agSystemReply(t, a, "YOLO")
	send(t, a, def, "/status")
	s = agSystemReply(t, a, "Model:")
	if !strings.Contains(s, "Reasoning: high") || !strings.Contains(s, "Approvals: off") {
		t.Errorf("/status %q", s)
	}
	send(t, a, def, "/help")
	h := agSystemReply(t, a, "Commands:")
	for _, c := range fetchCatalog(t, a) {
		if !strings.Contains(h, c.Name+" ") {
			t.Errorf("/help lacks %s", c.Name)
		}
	}
	if !strings.Contains(h, "/reset") {
		t.Error("/help does not name the alias /reset")
	}
	r.noMoreRequests(0)
}

// TestModelUnknownCommand: an unknown /word gets a helpful system message
// and no model call; a path is not a command.
func TestModelUnknownCommand(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	send(t, a, def, "/frobnicate now")
	got := until(t, a, is(t, "message", "role", "system"))
	txt := testgw.Str(t, got[len(got)-1], "text")
	if !strings.Contains(txt, "/frobnicate") || !strings.Contains(txt, "/help") {
		t.Fatalf("reply %q", txt)
	}
	send(t, a, def, "/modle")
	if txt := agSystemReply(t, a, "Unknown command"); !strings.Contains(txt, "Did you mean /model?") {
		t.Fatalf("reply %q", txt)
	}
	none(t, "after unknown commands", barrier(t, a), is(t, "agent.busy"))
	r.noMoreRequests(0)
	// Text that only starts with a slash is a message for the model.
	r.reply("that is a path")
	agTurn(t, a, def, "/usr/bin/env is what?")
	if m := agLast(t, r.requests(1)[0]); m["content"] != "/usr/bin/env is what?" {
		t.Fatalf("sent %v", m)
	}
}

// TestModelNewSession: /new with a conversation asks first (picker.confirm);
// confirmed, the next request starts afresh; cancelled, nothing changes.
func TestModelNewSession(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	r.reply("first answer")
	agTurn(t, a, def, "first question")
	send(t, a, def, "/reset") // the alias
	f := a.Expect("picker.confirm", nil)
	if !strings.Contains(string(f.Raw), `"value":"once"`) || !strings.Contains(string(f.Raw), `"value":"cancel"`) || testgw.Str(t, f, "title") == "" {
		t.Fatalf("picker.confirm %s", f.Raw)
	}
	if ans := selectChoice(t, a, testgw.Str(t, f, "picker_id"), "cancel"); !strings.Contains(testgw.Str(t, ans, "text"), "Kept") {
		t.Fatalf("reply %s", ans.Raw)
	}
	r.reply("second answer")
	agTurn(t, a, def, "second question")
	if req := r.requests(2)[1]; !agSaid(t, req, "user", "first question") {
		t.Fatal("cancel dropped the conversation")
	}
	send(t, a, def, "/new")
	f = a.Expect("picker.confirm", nil)
	if ans := selectChoice(t, a, testgw.Str(t, f, "picker_id"), "once"); !strings.Contains(testgw.Str(t, ans, "text"), "New session") {
		t.Fatalf("reply %s", ans.Raw)
	}
	r.reply("fresh answer")
	agTurn(t, a, def, "third question")
	if got := agRoles(t, r.requests(3)[2]); got != "system,user" {
		t.Fatalf("after /new the request has %s", got)
	}
	// With no conversation there is nothing to confirm.
	send(t, a, def, "/new")
	f = a.Expect("picker.confirm", nil) // the third question is a conversation
	selectChoice(t, a, testgw.Str(t, f, "picker_id"), "once")
	send(t, a, def, "/new")
	agSystemReply(t, a, "New session")
	none(t, "/new on an empty conversation", barrier(t, a), is(t, "picker.confirm"))
}

// TestModelRetryAndUndo: /retry answers the last message again without
// the old reply; /undo removes the last exchange from chat and model.
func TestModelRetryAndUndo(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	r.reply("answer one")
	agTurn(t, a, def, "question one")
	r.reply("answer two, badly")
	s2 := agStop(t, agTurn(t, a, def, "question two"))

	r.reply("answer two, better")
	retryID := send(t, a, def, "/retry")
	got := until(t, a, is(t, "agent.idle"))
	del := agOne(t, got, "message.deleted")
	if ids := fmt.Sprint(testgw.P(t, del)["message_ids"]); !strings.Contains(ids, s2.MessageID) || !strings.Contains(ids, retryID) {
		t.Fatalf("deleted %s, want the old reply %s and /retry %s", ids, s2.MessageID, retryID)
	}
	if s := agStop(t, got); s.FinalText != "answer two, better" {
		t.Fatalf("retry answered %q", s.FinalText)
	}
	req := r.requests(3)[2]
	if agRoles(t, req) != "system,user,assistant,user" || agSaid(t, req, "", "badly") || agLast(t, req)["content"] != "question two" {
		t.Fatalf("the retried request: %v", agMsgs(t, req))
	}
	h, err := history(t, a, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range h.Messages {
		texts = append(texts, m.Text)
	}
	if strings.Join(texts, "|") != "question one|answer one|question two|answer two, better" {
		t.Fatalf("history after /retry: %q", texts)
	}

	send(t, a, def, "/undo")
	agSystemReply(t, a, "Removed your last message")
	h, _ = history(t, a, def, nil)
	if len(h.Messages) != 2 || h.Messages[1].Text != "answer one" {
		t.Fatalf("history after /undo: %+v", h.Messages)
	}
	r.reply("answer three")
	agTurn(t, a, def, "question three")
	req = r.requests(4)[3]
	if agRoles(t, req) != "system,user,assistant,user" || agSaid(t, req, "", "question two") || agSaid(t, req, "", "answer two") {
		t.Fatalf("after /undo the model still sees the exchange: %v", agMsgs(t, req))
	}
	// Nothing left to undo is said so.
	send(t, a, def, "/undo")
	agSystemReply(t, a, "Removed")
	send(t, a, def, "/undo")
	agSystemReply(t, a, "Removed")
	send(t, a, def, "/undo")
	agSystemReply(t, a, "no message of yours")
}

// TestModelTitle: /title renames the chat.
func TestModelTitle(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	send(t, a, def, "/title  Project X ")
	f := a.Expect("channel.renamed", nil)
	if c := entry(t, f); c.ChatID != "default" || c.Name != "Project X" {
		t.Fatalf("renamed %s", f.Raw)
	}
	send(t, a, def, "/title")
	agSystemReply(t, a, "usage: /title")
}

// TestModelStopAndQueueCommands: /queue waits behind the running turn;
// /stop ends the running one.
func TestModelStopAndQueueCommands(t *testing.T) {
	r := agStart(t)
	hold := make(chan struct{})
	defer close(hold)
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("held reply that is stopped", 4), Hold: hold, HoldAfter: 2})
	r.reply("the queued one")
	a := r.dial("phone")
	send(t, a, def, "first")
	a.Expect("message.update", nil)
	send(t, a, def, "/queue then this")
	barrier(t, a)
	for _, c := range []string{"/new", "/retry", "/undo"} { // not while a turn runs
		send(t, a, def, c)
		agSystemReply(t, a, c+": wait for the running turn to end")
	}
	send(t, a, def, "/stop")
	first := until(t, a, is(t, "agent.idle"))
	if s := agStop(t, first); s.FinalText != "held r" {
		t.Fatalf("stopped with %q", s.FinalText)
	}
	if s := agStop(t, until(t, a, is(t, "agent.idle"))); s.FinalText != "the queued one" {
		t.Fatalf("queued turn: %q", s.FinalText)
	}
	if m := agLast(t, r.requests(2)[1]); m["content"] != "then this" {
		t.Fatalf("queued request %v", m)
	}
}
