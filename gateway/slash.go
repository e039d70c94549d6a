package gateway

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Command is a slash command of the gateway's catalog.
type Command struct {
	Name        string // with the slash
	Aliases     []string
	Description string
	ArgsHint    string
	Category    string
	run         func(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error
}

// Commands is the catalog, in the order /help shows it.
func (g *Gateway) Commands() []Command { return commands }

var commands []Command

func init() {
	commands = []Command{
		{Name: "/new", Aliases: []string{"/reset"}, Description: "Start a new session (fresh conversation, approvals and todo list)", ArgsHint: "", Category: "Session", run: cmdNew},
		{Name: "/retry", Description: "Answer your last message again", Category: "Session", run: cmdRetry},
		{Name: "/undo", Description: "Remove your last message and its reply", Category: "Session", run: cmdUndo},
		{Name: "/title", Description: "Rename this chat", ArgsHint: "<name>", Category: "Session", run: cmdTitle},
		{Name: "/stop", Description: "Stop the running turn (all: and drop the queued messages)", ArgsHint: "[all]", Category: "Session", run: cmdStop},
		{Name: "/steer", Description: "Redirect the running turn", ArgsHint: "<text>", Category: "Session", run: cmdSteer},
		{Name: "/queue", Description: "Queue a message to run after the current turn", ArgsHint: "<text>", Category: "Session", run: cmdQueue},
		{Name: "/model", Description: "Switch model", ArgsHint: "[provider/model]", Category: "Configuration", run: cmdModel},
		{Name: "/reasoning", Description: "Set reasoning effort, or show/hide reasoning", ArgsHint: "[none|minimal|low|medium|high|show|hide]", Category: "Configuration", run: cmdReasoning},
		{Name: "/fast", Description: "Fast mode: minimal reasoning (and the fast model, when one is set)", ArgsHint: "[on|off]", Category: "Configuration", run: cmdFast},
		{Name: "/yolo", Description: "Ask nothing, for this session (toggle); the sandbox stays", Category: "Tools & Skills", run: cmdYolo},
		{Name: "/approve", Description: "Approve the pending command", ArgsHint: "[session|always]", Category: "Tools & Skills", run: cmdApprove},
		{Name: "/deny", Description: "Deny the pending command", Category: "Tools & Skills", run: cmdDeny},
		{Name: "/approvals", Description: "Choose what asks first: everything not read-only, only what leaves the sandbox, or nothing", ArgsHint: "[ask|auto|yolo]", Category: "Tools & Skills", run: cmdApprovals},
		{Name: "/tools", Description: "List the agent's tools and the MCP servers they come from", Category: "Tools & Skills", run: cmdTools},
		{Name: "/cron", Description: "List, add, pause, resume, remove or run scheduled jobs", ArgsHint: "[list|add SCHEDULE | PROMPT|pause ID|resume ID|rm ID|run ID]", Category: "Tools & Skills", run: cmdCron},
		{Name: "/status", Description: "Show session status", Category: "Info", run: cmdStatus},
		{Name: "/help", Description: "List the commands", Category: "Info", run: cmdHelp},
	}
}

var slashRe = regexp.MustCompile(`^/([A-Za-z][\w-]*)(?:\s+([\s\S]*))?$`)

// parseSlash splits "/cmd args"; ok is false for text that is not a
// command at all (like "/usr/bin is…").
func parseSlash(text string) (name, args string, ok bool) {
	m := slashRe.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return "", "", false
	}
	return "/" + strings.ToLower(m[1]), strings.TrimSpace(m[2]), true
}

func findCommand(name string) *Command {
	for i := range commands {
		c := &commands[i]
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// runSlash runs a slash command typed in a lane. Unknown commands get a
// helpful reply, never a model call.
func (g *Gateway) runSlash(ctx context.Context, from Caller, lk core.Lane, name, args string) {
	// The command's message has had its reply (the echo): nothing the
	// command does may answer that request again.
	from = Caller{Conn: from.Conn}
	c := findCommand(name)
	if c == nil {
		hint := ""
		if m := suggest(name); m != "" {
			hint = " Did you mean " + m + "?"
		}
		g.systemMessage(ctx, lk, fmt.Sprintf("Unknown command %s.%s Type /help for the list.", name, hint))
		return
	}
	if err := c.run(ctx, g, from, lk, args); err != nil {
		g.systemMessage(ctx, lk, c.Name+": "+core.AsError(err).Message)
	}
}

// Complete returns the commands matching a typed prefix: first those whose
// name or alias starts with it, then fuzzy (the letters in order).
func Complete(prefix string) []Command {
	p := strings.ToLower(strings.TrimSpace(prefix))
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	var exact, fuzzy []Command
	for _, c := range commands {
		names := append([]string{c.Name}, c.Aliases...)
		switch {
		case anyPrefix(names, p):
			exact = append(exact, c)
		case anySubsequence(names, p[1:]):
			fuzzy = append(fuzzy, c)
		}
	}
	return append(exact, fuzzy...)
}

// suggest names the command a mistyped one most likely meant: one it
// completes to, or else one within two typos (a transposition is one).
func suggest(name string) string {
	if m := Complete(name); len(m) > 0 {
		return m[0].Name
	}
	best, bestD := "", 3
	for _, c := range commands {
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if d := typos(name, n); d < bestD {
				best, bestD = c.Name, d
			}
		}
	}
	return best
}

// typos is the optimal string alignment distance between a and b.
func typos(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

func anyPrefix(names []string, p string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

func anySubsequence(names []string, p string) bool {
	if p == "" {
		return false
	}
	for _, n := range names {
		i := 0
		for _, r := range n[1:] {
			if i < len(p) && byte(r) == p[i] {
				i++
			}
		}
		if i == len(p) {
			return true
		}
	}
	return false
}

func cmdHelp(ctx context.Context, g *Gateway, _ Caller, lk core.Lane, _ string) error {
	var b strings.Builder
	b.WriteString("Commands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "%s %s — %s", c.Name, c.ArgsHint, c.Description)
		if len(c.Aliases) > 0 {
			fmt.Fprintf(&b, " (also %s)", strings.Join(c.Aliases, ", "))
		}
		b.WriteByte('\n')
	}
	g.systemMessage(ctx, lk, strings.TrimSpace(b.String()))
	return nil
}

// modelLister is an agent that offers a choice of models.
type modelLister interface {
	Providers() []agent.Provider
	Resolve(agent.Settings) (agent.Provider, agent.ModelInfo)
}

func cmdStatus(ctx context.Context, g *Gateway, _ Caller, lk core.Lane, _ string) error {
	s := g.settings(ctx, lk)
	as := g.agentSettings(lk, s)
	var b strings.Builder
	if ml, ok := g.cfg.Agent.(modelLister); ok {
		p, m := ml.Resolve(as)
		fmt.Fprintf(&b, "Model: %s (provider %s)\n", m.ID, p.ID)
	} else {
		fmt.Fprintf(&b, "Backend: %s. No model is configured, so replies are echoes: set OPENAI_BASE_URL, OPENAI_API_KEY and IRISGATE_MODEL to talk to a model.\n", g.cfg.Agent.Name())
	}
	reasoning := as.Reasoning
	if reasoning == "" {
		reasoning = "model default"
	}
	fmt.Fprintf(&b, "Reasoning: %s, shown: %v, fast: %v\n", reasoning, g.showReasoning(s), s.Fast)
	conv, _ := g.st.ConversationLen(ctx, lk) // counted, not read: /status works on a damaged one
	fmt.Fprintf(&b, "Conversation: %d entries\n", conv)
	g.mu.Lock()
	queued, running := 0, false
	if l := g.lanes[lk]; l != nil {
		queued, running = len(l.pending), l.running != nil
	}
	g.mu.Unlock()
	fmt.Fprintf(&b, "Turn running: %v, queued: %d\n", running, queued)
	fmt.Fprintf(&b, "Approvals: %s — %s\n", map[bool]string{true: "off", false: "on"}[as.Yolo], strings.ToLower(approvalsLabel(s, as.Yolo)))
	fmt.Fprintf(&b, "Working directory: %s", homeRelative(g.cfg.Workdir))
	g.systemMessage(ctx, lk, b.String())
	return nil
}

func cmdNew(ctx context.Context, g *Gateway, from Caller, lk core.Lane, _ string) error {
	reset := func(ctx context.Context, to Caller) error {
		if g.laneBusy(lk) {
			// The running turn would go on recording into the new session.
			return core.Errorf(core.CodeUnsupported, "wait for the running turn to end (or /stop it)")
		}
		if err := g.commit(ctx, func(tx store.Tx) error { return tx.ClearConversation(lk) }, nil); err != nil {
			return err
		}
		g.mu.Lock()
		delete(g.sessions, lk)
		hadTodos := false
		if l := g.lanes[lk]; l != nil {
			hadTodos = len(l.todos) > 0
			l.todos = nil
		}
		g.mu.Unlock()
		if hadTodos {
			g.publish(&core.Event{Type: core.EvTodo, Lane: lk, Todos: []core.Todo{}})
		}
		g.replyMessage(ctx, lk, to, "✨ New session: the agent starts with a fresh conversation.")
		return nil
	}
	if g.laneBusy(lk) {
		return core.Errorf(core.CodeUnsupported, "wait for the running turn to end (or /stop it)")
	}
	conv, err := g.st.ConversationLen(ctx, lk) // /new must work on a conversation that does not decode
	if err != nil {
		return err
	}
	if conv == 0 {
		return reset(ctx, from)
	}
	return g.openPicker(ctx, lk, &picker{
		p: core.Picker{Kind: "confirm", Title: "Start a new session? The agent forgets this conversation.", Choices: []core.Choice{
			{Value: "once", Label: "Start new session"}, {Value: "cancel", Label: "Cancel"},
		}},
		onSelect: func(ctx context.Context, to Caller, v string) error {
			if v != "once" {
				g.replyMessage(ctx, lk, to, "Kept the current session.")
				return nil
			}
			return reset(ctx, to)
		},
	})
}

func cmdModel(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error {
	ml, ok := g.cfg.Agent.(modelLister)
	if !ok {
		return core.Errorf(core.CodeUnsupported, "no model is configured (the demo echo agent answers); set OPENAI_BASE_URL, OPENAI_API_KEY and IRISGATE_MODEL")
	}
	set := func(ctx context.Context, to Caller, v string) error {
		s := g.settings(ctx, lk)
		prov, model, found := strings.Cut(v, "/")
		switch {
		case !found && providerExists(ml, v):
			// A provider alone: its first model.
			p, m := ml.Resolve(agent.Settings{Provider: v})
			prov, model = p.ID, m.ID
		case !found || !providerExists(ml, prov):
			// A model alone, or a vendor-prefixed id like openai/gpt-5: on
			// the provider that lists it, else on the current one.
			cur, _ := ml.Resolve(g.agentSettings(lk, s))
			prov, model = cur.ID, v
			if p := listing(ml, v); p != "" {
				prov = p
			}
		}
		s.Provider, s.Model = prov, model
		if err := g.saveSettings(ctx, lk, s); err != nil {
			return err
		}
		g.replyMessage(ctx, lk, to, fmt.Sprintf("Model: %s (provider %s).", model, prov))
		return nil
	}
	if args != "" {
		return set(ctx, from, args)
	}
	cur, curModel := ml.Resolve(g.agentSettings(lk, g.settings(ctx, lk)))
	p := core.Picker{Kind: "model", Title: "Model", CurrentModel: curModel.ID, CurrentProvider: cur.ID}
	for _, pr := range ml.Providers() {
		cp := core.Provider{ID: pr.ID, Label: orDefault(pr.Label, pr.ID)}
		for _, m := range pr.Models {
			cp.Models = append(cp.Models, core.Choice{Value: m.ID, Label: orDefault(m.Label, m.ID)})
		}
		p.Providers = append(p.Providers, cp)
	}
	return g.openPicker(ctx, lk, &picker{p: p, onSelect: set})
}

// listing returns the first provider that lists model, or "" when none
// does.
func listing(ml modelLister, model string) string {
	for _, p := range ml.Providers() {
		for _, m := range p.Models {
			if m.ID == model {
				return p.ID
			}
		}
	}
	return ""
}

func providerExists(ml modelLister, id string) bool {
	for _, p := range ml.Providers() {
		if p.ID == id {
			return true
		}
	}
	return false
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

var reasoningLevels = []string{"none", "minimal", "low", "medium", "high"}

func cmdReasoning(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error {
	set := func(ctx context.Context, to Caller, v string) error {
		s := g.settings(ctx, lk)
		switch v {
		case "show", "hide":
			on := v == "show"
			s.ShowReasoning = &on
		default:
			if !contains(reasoningLevels, v) {
				return core.Errorf(core.CodeUnsupported, "unknown level %q: use %s, show or hide", v, strings.Join(reasoningLevels, ", "))
			}
			s.Reasoning = v
		}
		if err := g.saveSettings(ctx, lk, s); err != nil {
			return err
		}
		g.replyMessage(ctx, lk, to, fmt.Sprintf("Reasoning effort: %s, shown: %v.", orDefault(s.Reasoning, "model default"), g.showReasoning(s)))
		return nil
	}
	if args != "" {
		return set(ctx, from, strings.ToLower(args))
	}
	s := g.settings(ctx, lk)
	p := core.Picker{Kind: "choice", Title: "Reasoning effort"}
	for _, l := range reasoningLevels {
		p.Choices = append(p.Choices, core.Choice{Value: l, Label: strings.ToUpper(l[:1]) + l[1:], IsCurrent: s.Reasoning == l})
	}
	show := g.showReasoning(s)
	p.Choices = append(p.Choices, core.Choice{Value: "show", Label: "Show reasoning", IsCurrent: show}, core.Choice{Value: "hide", Label: "Hide reasoning", IsCurrent: !show})
	return g.openPicker(ctx, lk, &picker{p: p, onSelect: set})
}

func cmdFast(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error {
	set := func(ctx context.Context, to Caller, v string) error {
		s := g.settings(ctx, lk)
		switch v {
		case "on":
			s.Fast = true
		case "off":
			s.Fast = false
		default:
			return core.Errorf(core.CodeUnsupported, "use /fast on or /fast off")
		}
		if err := g.saveSettings(ctx, lk, s); err != nil {
			return err
		}
		g.replyMessage(ctx, lk, to, "Fast mode "+v+".")
		return nil
	}
	if args != "" {
		return set(ctx, from, strings.ToLower(args))
	}
	s := g.settings(ctx, lk)
	return g.openPicker(ctx, lk, &picker{
		p: core.Picker{Kind: "choice", Title: "Fast mode", Choices: []core.Choice{
			{Value: "on", Label: "On", IsCurrent: s.Fast}, {Value: "off", Label: "Off", IsCurrent: !s.Fast},
		}},
		onSelect: set,
	})
}

func cmdStop(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error {
	switch strings.ToLower(args) {
	case "":
		return g.Stop(ctx, Caller{}, lk)
	case "all":
	default:
		return core.Errorf(core.CodeUnsupported, "use /stop (the running turn) or /stop all (and the queued messages)")
	}
	// The queue first: stopping the turn would start the next one.
	n, err := g.dropQueued(ctx, lk)
	if err != nil {
		return err
	}
	if err := g.Stop(ctx, Caller{}, lk); err != nil {
		return err
	}
	g.systemMessage(ctx, lk, fmt.Sprintf("⏹ Stopped; dropped %d queued message%s (they stay in the chat, unanswered).", n, plural(n)))
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func cmdSteer(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error {
	if args == "" {
		return core.Errorf(core.CodeUnsupported, "usage: /steer <text>")
	}
	return g.Steer(ctx, Caller{Conn: from.Conn}, lk, args)
}

func cmdQueue(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error {
	if args == "" {
		return core.Errorf(core.CodeUnsupported, "usage: /queue <text>")
	}
	return g.Send(ctx, Caller{Conn: from.Conn}, SendRequest{Lane: lk, Text: args})
}

func cmdTitle(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error {
	if args == "" {
		return core.Errorf(core.CodeUnsupported, "usage: /title <name>")
	}
	id := lk.ChatID
	if lk.ThreadID != "" {
		id = lk.ThreadID
	}
	return g.ChangeChannel(ctx, Caller{}, id, ChannelChange{Name: &args})
}

// lastExchange finds the lane's newest user message and the replies after it.
func (g *Gateway) lastExchange(ctx context.Context, lk core.Lane) (user core.Message, after []string, err error) {
	ms, _, err := g.st.History(ctx, lk, "", 50)
	if err != nil {
		return user, nil, err
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == core.RoleUser && !isSlash(ms[i].Text) {
			for _, m := range ms[i+1:] {
				after = append(after, m.ID)
			}
			return ms[i], after, nil
		}
	}
	return user, nil, core.Errorf(core.CodeNotFound, "there is no message of yours to go back to")
}

func isSlash(text string) bool {
	_, _, ok := parseSlash(text)
	return ok
}

// laneBusy reports whether a turn runs or waits in the lane. A turn whose
// agent.idle has gone out no longer counts: a device acting on that idle
// must find the lane free.
func (g *Gateway) laneBusy(lk core.Lane) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.lanes[lk]
	if l == nil {
		return false
	}
	if len(l.pending) > 0 {
		return true
	}
	if t := l.running; t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		return !t.ended
	}
	return false
}

func cmdUndo(ctx context.Context, g *Gateway, from Caller, lk core.Lane, _ string) error {
	if g.laneBusy(lk) {
		return core.Errorf(core.CodeUnsupported, "wait for the running turn to end (or /stop it)")
	}
	user, after, err := g.lastExchange(ctx, lk)
	if err != nil {
		return err
	}
	ids := append([]string{user.ID}, after...)
	if err := g.commit(ctx, func(tx store.Tx) error {
		if err := tx.TruncateConversation(lk, user.ID); err != nil {
			return err
		}
		return tx.DeleteMessages(lk, ids)
	}, &core.Event{Type: core.EvMessageDeleted, Lane: lk, MessageIDs: ids}); err != nil {
		return err
	}
	g.systemMessage(ctx, lk, "↩️ Removed your last message and its reply.")
	return nil
}

func cmdRetry(ctx context.Context, g *Gateway, from Caller, lk core.Lane, _ string) error {
	if g.laneBusy(lk) {
		return core.Errorf(core.CodeUnsupported, "wait for the running turn to end (or /stop it)")
	}
	user, after, err := g.lastExchange(ctx, lk)
	if err != nil {
		return err
	}
	g.mu.Lock()
	slot, err := g.takeSlotLocked(tokenOf(from), false)
	g.mu.Unlock()
	if err != nil {
		return err
	}
	var ev *core.Event
	if len(after) > 0 {
		ev = &core.Event{Type: core.EvMessageDeleted, Lane: lk, MessageIDs: after}
	}
	if err := g.commit(ctx, func(tx store.Tx) error {
		if err := tx.TruncateConversation(lk, user.ID); err != nil {
			return err
		}
		if err := tx.DeleteMessages(lk, after); err != nil {
			return err
		}
		return tx.QueueTurn(lk, user.ID) // owed like any turn: a restart still answers it
	}, ev); err != nil {
		g.freeSlot(slot)
		return err
	}
	return g.enqueue(pendingTurn{msg: user, origin: from.Conn, slot: slot})
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// homeRelative shows a path under the home directory as ~/….
func homeRelative(p string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p
	}
	if p == home {
		return "~"
	}
	if rel, ok := strings.CutPrefix(p, home+string(os.PathSeparator)); ok {
		return "~/" + rel
	}
	return p
}
