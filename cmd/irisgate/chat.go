package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/irisgate/irisgate/client"
)

// ChatCmd is a terminal chat with the agent: a person's Iris device.
type ChatCmd struct {
	URL    string `help:"WebSocket URL of the gateway." default:"ws://localhost:8787/ws" env:"IRISGATE_URL"`
	Token  string `help:"Device token (required; irisgate token create makes one)." env:"IRISGATE_TOKEN"`
	Device string `help:"Device id to connect as (default chat-<hostname>). Two chats need two ids."`
	Chat   string `help:"Channel or thread id to start in (default: the default channel)."`
}

// Run implements the command.
func (c *ChatCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := chatOptions{URL: c.URL, Token: c.Token, Device: c.Device, Chat: c.Chat,
		Color: colorTerminal(os.Stdout), Interactive: isTerminal(os.Stdin)}
	return runChat(ctx, o, os.Stdin, os.Stdout)
}

// colorTerminal reports whether f is a terminal that takes ANSI dim/bold.
func colorTerminal(f *os.File) bool {
	if _, ok := os.LookupEnv("NO_COLOR"); ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	return isTerminal(f)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// chatOptions configure runChat.
type chatOptions struct {
	URL    string
	Token  string
	Device string // default chat-<hostname>
	Chat   string // lane to start in: a channel or thread id
	Color  bool   // ANSI dim/bold; off for pipes and tests
	// Interactive says the input is a terminal that echoes what is typed:
	// a typed line, Enter included, is then already on screen.
	Interactive bool
}

const (
	defaultChatURL = "ws://localhost:8787/ws"
	historyPage    = 20
	requestTimeout = 30 * time.Second
	// thinkingAfter is how long a busy agent may stay silent before the
	// chat says it is working.
	thinkingAfter = 1500 * time.Millisecond
)

var errNoToken = errors.New("no token: pass --token or set IRISGATE_TOKEN " +
	"(irisgate token create --data DIR makes one, or use the token the gateway printed on its first start)")

func defaultDevice() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "terminal"
	}
	h = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return unicode.ToLower(r)
		}
		return '-'
	}, h)
	return "chat-" + h
}

// runChat is the chat: it connects, shows the channels and the current
// lane's recent messages, then sends each line read from in and renders
// the gateway's frames on out until in ends, :quit, or ctx ends.
func runChat(ctx context.Context, o chatOptions, in io.Reader, out io.Writer) error {
	if strings.TrimSpace(o.Token) == "" {
		return errNoToken
	}
	if o.URL == "" {
		o.URL = defaultChatURL
	}
	if o.Device == "" {
		o.Device = defaultDevice()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	s := newChatSession(o, out, cancel)
	name, _ := os.Hostname()
	cl := client.New(o.URL, client.Options{Token: o.Token, DeviceID: o.Device, DeviceName: "irisgate chat on " + name}, 0)
	cl.OnState = s.onState
	s.cl = cl

	runErr := make(chan error, 1)
	runExit := make(chan struct{})
	go func() {
		runErr <- cl.Run(ctx)
		close(runExit)
	}()
	renderDone := make(chan struct{})
	rendering := false
	defer func() {
		cancel()
		<-runExit
		if rendering {
			<-renderDone
		}
		s.mu.Lock()
		s.breakLine()
		s.closed = true
		s.mu.Unlock()
	}()

	s.printf("%s", s.dim(fmt.Sprintf("connecting to %s as %s …", o.URL, o.Device)))
	connCh := make(chan *client.Conn, 1)
	go func() {
		if conn, err := cl.Conn(ctx); err == nil {
			connCh <- conn
		}
	}()
	var conn *client.Conn
	select {
	case conn = <-connCh:
	case err := <-runErr:
		return s.runFailed(err)
	case <-ctx.Done():
		return s.fatal()
	}

	chans := decodeChannels(conn.Welcome().Channels)
	s.mu.Lock()
	s.dir = chans
	s.connected, s.everConnected = true, true
	lane, err := s.startLane()
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.lane = lane
	s.println("connected to " + o.URL + " as " + o.Device + ".")
	s.printChannels()
	s.mu.Unlock()
	s.showHistory(ctx, lane, "")

	rendering = true
	go func() {
		defer close(renderDone)
		for f := range cl.Events() {
			s.handleFrame(f)
		}
	}()
	s.printf("%s", s.dim("Type a message and press Enter. :help lists the chat's own commands."))

	lines := make(chan string)
	stopRead := make(chan struct{})
	defer close(stopRead)
	go readLines(in, lines, stopRead, s)

	for {
		select {
		case line, ok := <-lines:
			if !ok {
				s.printf("%s", s.dim("bye."))
				return nil
			}
			if o.Interactive {
				s.typed()
			}
			if quit := s.command(ctx, line); quit {
				s.printf("%s", s.dim("bye."))
				return nil
			}
		case err := <-runErr:
			return s.runFailed(err)
		case <-ctx.Done():
			return s.fatal()
		}
	}
}

func newChatSession(o chatOptions, out io.Writer, stop context.CancelFunc) *chatSession {
	return &chatSession{opts: o, out: out, color: o.Color, stop: stop,
		seen: make(map[string]bool), shown: make(map[string]string), busy: make(map[client.Lane]bool),
		oldest: make(map[client.Lane]string), more: make(map[client.Lane]bool)}
}

// readLines sends each line of in to lines and closes lines at the end.
func readLines(in io.Reader, lines chan<- string, stop <-chan struct{}, s *chatSession) {
	defer close(lines)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		select {
		case lines <- strings.TrimRight(sc.Text(), "\r"):
		case <-stop:
			return
		}
	}
	if err := sc.Err(); err != nil {
		s.printf("! reading input: %v", err)
	}
}

// typed notes that the terminal has echoed a line the person typed, which
// ended any streamed line on screen: the reply resumes on a line of its own.
func (s *chatSession) typed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.midLine {
		s.midLine = false
		if s.cur != nil {
			s.cur.broken = true
		}
	}
}

// fatal is why the chat was ended from within, nil when it was not.
func (s *chatSession) fatal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatalErr
}

// runFailed explains why the client stopped for good.
func (s *chatSession) runFailed(err error) error {
	if ferr := s.fatal(); ferr != nil {
		return ferr
	}
	var se *client.ServerError
	if errors.As(err, &se) && se.Code == "auth" {
		return fmt.Errorf("the gateway at %s refused the token: %s (check --token or IRISGATE_TOKEN)", s.opts.URL, se.Message)
	}
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("connection to %s ended: %w", s.opts.URL, err)
}

// chanEntry is one entry of the channel directory.
type chanEntry struct {
	ChatID       string `json:"chat_id"`
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	ParentChatID string `json:"parent_chat_id"`
	IsDefault    bool   `json:"is_default"`
	Auto         bool   `json:"auto"`
	Automation   bool   `json:"automation"`
}

func (e chanEntry) isThread() bool { return e.Kind == "thread" }

func (e chanEntry) lane() client.Lane {
	if e.isThread() {
		return client.Lane{ChatID: e.ParentChatID, ThreadID: e.ChatID}
	}
	return client.Lane{ChatID: e.ChatID}
}

func decodeChannels(raw []json.RawMessage) []chanEntry {
	out := make([]chanEntry, 0, len(raw))
	for _, r := range raw {
		var e chanEntry
		if json.Unmarshal(r, &e) == nil && e.ChatID != "" {
			out = append(out, e)
		}
	}
	return out
}

// Payloads the chat reads.
type (
	runtimeInfo struct {
		Model      string   `json:"model"`
		ContextPct *int     `json:"context_pct"`
		Cwd        string   `json:"cwd"`
		Latency    *float64 `json:"latency"`
		Cost       *float64 `json:"cost"`
	}
	mediaInfo struct {
		MediaID  string `json:"media_id"`
		Kind     string `json:"kind"`
		Mime     string `json:"mime"`
		Size     int64  `json:"size"`
		Filename string `json:"filename"`
	}
	// msgInfo covers message, message.start/update/stop and commentary.
	msgInfo struct {
		MessageID string       `json:"message_id"`
		Role      string       `json:"role"`
		Text      string       `json:"text"`
		FinalText string       `json:"final_text"`
		Reasoning string       `json:"reasoning"`
		Model     string       `json:"model"`
		Tokens    int          `json:"tokens"`
		TS        int64        `json:"ts"`
		Runtime   *runtimeInfo `json:"runtime"`
		Media     []mediaInfo  `json:"media"`
	}
	toolInfo struct {
		Name     string   `json:"name"`
		Preview  string   `json:"preview"`
		Emoji    string   `json:"emoji"`
		Note     string   `json:"note"`
		OK       *bool    `json:"ok"`
		Duration *float64 `json:"duration"`
		Output   string   `json:"output_preview"`
	}
	historyInfo struct {
		Messages        []msgInfo `json:"messages"`
		HasMore         bool      `json:"has_more"`
		OldestMessageID string    `json:"oldest_message_id"`
	}
	laneInfo struct {
		ChatID   string `json:"chat_id"`
		ThreadID string `json:"thread_id"`
	}
)

// stream is the reply being printed as it grows.
type stream struct {
	id      string
	printed string // the text so far: on screen, but for pending
	pending string // trailing newlines held back until more text comes
	broken  bool   // other lines were printed since its last piece
}

// chatSession is the state shared by the input loop and the frame loop.
type chatSession struct {
	opts chatOptions
	cl   *client.Client
	stop context.CancelFunc // ends the chat

	mu            sync.Mutex // guards what follows and every write to out
	out           io.Writer
	color         bool
	closed        bool
	midLine       bool // the cursor is after a streamed piece, not at a line start
	cur           *stream
	lane          client.Lane
	dir           []chanEntry
	listing       []chanEntry       // as last numbered by :channels
	seen          map[string]bool   // finished messages already rendered live
	shown         map[string]string // messages printed from history, with their text
	busy          map[client.Lane]bool
	oldest        map[client.Lane]string // oldest message shown, for :history
	more          map[client.Lane]bool
	quiet         int // bumped by any output of the current lane (for "working…")
	connected     bool
	everConnected bool
	fatalErr      error // why the chat was ended from within
	lastDropErr   string
}

// Output helpers; all need s.mu held except printf.

func (s *chatSession) write(str string) {
	if !s.closed {
		io.WriteString(s.out, str)
	}
}

// breakLine ends a streamed line that other output is about to follow.
func (s *chatSession) breakLine() {
	if s.midLine {
		s.write("\n")
		s.midLine = false
		if s.cur != nil {
			s.cur.broken = true
		}
	}
}

func (s *chatSession) println(line string) {
	s.breakLine()
	s.write(line + "\n")
}

// printf prints one line, taking the lock.
func (s *chatSession) printf(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.println(fmt.Sprintf(format, a...))
}

func (s *chatSession) dim(str string) string {
	if !s.color {
		return str
	}
	return "\x1b[2m" + str + "\x1b[0m"
}

func (s *chatSession) bold(str string) string {
	if !s.color {
		return str
	}
	return "\x1b[1m" + str + "\x1b[0m"
}

// roleLabel is the label before a message's text.
func roleLabel(role string) string {
	switch role {
	case "assistant", "":
		return "agent › "
	case "user":
		return "you › "
	default:
		return role + " › "
	}
}

// indented lays out text under a label: continuation lines line up with
// the first line's text.
func indented(label, text string) string {
	pad := "\n" + strings.Repeat(" ", utf8.RuneCountInString(label))
	return strings.ReplaceAll(text, "\n", pad)
}

func (s *chatSession) printMessage(m msgInfo, when bool) {
	label := roleLabel(m.Role)
	text := m.Text
	if text == "" {
		text = m.FinalText
	}
	prefix, stamp := "", ""
	if when && m.TS > 0 {
		stamp = clock(m.TS) + " "
		prefix = s.dim(stamp)
	}
	if m.Reasoning != "" {
		s.println(prefix + s.dim("(thinking) "+oneLine(m.Reasoning, 200)))
	}
	s.println(prefix + s.bold(label) + indented(stamp+label, text))
	for _, md := range m.Media {
		s.println(s.dim("  " + describeMedia(md)))
	}
}

func clock(ms int64) string {
	t := time.UnixMilli(ms).Local()
	if y, m, d := t.Date(); y == time.Now().Year() && m == time.Now().Month() && d == time.Now().Day() {
		return t.Format("15:04")
	}
	return t.Format("Jan 2 15:04")
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}

func describeMedia(m mediaInfo) string {
	name := m.Filename
	if name == "" {
		name = m.MediaID
	}
	return fmt.Sprintf("[%s %s, %s]", m.Kind, name, humanBytes(m.Size))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// footer is the dim line under a finished reply: model, latency and the
// rest of the runtime the gateway reports.
func (s *chatSession) footer(m msgInfo) string {
	var parts []string
	model := m.Model
	if m.Runtime != nil && m.Runtime.Model != "" {
		model = m.Runtime.Model
	}
	if model != "" {
		parts = append(parts, model)
	}
	if r := m.Runtime; r != nil {
		if r.Latency != nil {
			parts = append(parts, strconv.FormatFloat(*r.Latency, 'f', 1, 64)+"s")
		}
		if r.ContextPct != nil {
			parts = append(parts, fmt.Sprintf("context %d%%", *r.ContextPct))
		}
		if r.Cost != nil {
			parts = append(parts, fmt.Sprintf("$%.4f", *r.Cost))
		}
	}
	if m.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", m.Tokens))
	}
	if len(parts) == 0 {
		return ""
	}
	return s.dim("  ─ " + strings.Join(parts, " · "))
}

// Streaming.

// streamText prints what text adds to the reply id on screen.
func (s *chatSession) streamText(id, text string) {
	st := s.cur
	if st == nil || st.id != id {
		s.endStream()
		s.breakLine()
		st = &stream{id: id}
		s.cur = st
		s.write(s.bold(roleLabel("assistant")))
		s.midLine = true
	}
	if !strings.HasPrefix(text, st.printed) {
		// The text was revised rather than extended: show it anew.
		s.breakLine()
		s.write(s.bold(roleLabel("assistant")) + s.dim("(revised) "))
		s.midLine = true
		st.printed, st.pending, st.broken = "", "", false
	}
	add := text[len(st.printed):]
	if add == "" {
		return
	}
	if st.broken {
		s.breakLine()
		s.write(s.bold(roleLabel("assistant")) + s.dim("… "))
		s.midLine = true
		st.broken, st.pending = false, "" // a fresh line needs no held-back break
	}
	st.printed = text
	all := st.pending + add
	shown := strings.TrimRight(all, "\n")
	st.pending = all[len(shown):]
	s.write(indented(roleLabel("assistant"), shown))
	s.midLine = true
}

// endStream ends the open reply's line.
func (s *chatSession) endStream() {
	if s.cur == nil {
		return
	}
	if s.midLine {
		s.write("\n")
		s.midLine = false
	}
	s.cur = nil
}

// Frames.

func frameLane(f client.Frame) client.Lane {
	l := client.Lane{ChatID: f.ChatID, ThreadID: f.ThreadID}
	if l.ChatID == "" {
		var p laneInfo
		if json.Unmarshal(f.Payload, &p) == nil {
			l = client.Lane{ChatID: p.ChatID, ThreadID: p.ThreadID}
		}
	}
	return l
}

// handleFrame renders one frame from the gateway.
func (s *chatSession) handleFrame(f client.Frame) {
	if f.Binary {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f.Type {
	case "channel.created", "channel.renamed":
		var e chanEntry
		if f.Decode(&e) != nil || e.ChatID == "" {
			return
		}
		old, had := s.entry(e.ChatID)
		s.upsert(e)
		if f.ID != 0 {
			return // our own request: the command says what happened
		}
		switch {
		case f.Type == "channel.created" && !had:
			what := "channel #" + s.nameOf(e)
			if e.isThread() {
				what = "thread " + s.nameOf(e) + " in " + s.laneName(client.Lane{ChatID: e.ParentChatID})
			}
			s.println(s.dim(fmt.Sprintf("+ new %s (%s)", what, e.ChatID)))
		case f.Type == "channel.renamed" && had && old.Name != e.Name:
			s.println(s.dim(fmt.Sprintf("~ %q is now called %q", old.Name, e.Name)))
		}
		return
	case "channel.deleted":
		var p laneInfo
		if f.Decode(&p) != nil || p.ChatID == "" {
			return
		}
		e, had := s.entry(p.ChatID)
		s.remove(p.ChatID)
		if had && f.ID == 0 {
			s.println(s.dim(fmt.Sprintf("- %s (%s) was deleted", s.nameOf(e), e.ChatID)))
		}
		if s.lane.ChatID == p.ChatID || s.lane.ThreadID == p.ChatID {
			s.lane = s.defaultLane()
			s.endStream()
			s.println(fmt.Sprintf("The conversation you were in is gone; you are now in %s.", s.laneName(s.lane)))
		}
		return
	case "status":
		var p struct {
			State string `json:"state"`
		}
		f.Decode(&p)
		switch p.State {
		case "restarting":
			s.println("! the gateway is restarting; the chat reconnects by itself")
		case "degraded":
			s.println("! the gateway reports it is degraded")
		}
		return
	case "sync.done":
		var p struct {
			Truncated bool `json:"truncated"`
		}
		if f.Decode(&p) == nil && p.Truncated {
			s.println(s.dim("(some of what happened while you were away was already pruned; :history shows the conversation)"))
		}
		return
	case "error":
		if f.ID != 0 {
			return // a reply to a request; the requester reports it
		}
		var e client.ServerError
		f.Decode(&e)
		s.println(fmt.Sprintf("! gateway error (%s): %s", e.Code, e.Message))
		return
	case "agent.busy", "agent.idle":
		lane := frameLane(f)
		s.busy[lane] = f.Type == "agent.busy"
		if lane == s.lane {
			s.quiet++
			if f.Type == "agent.busy" {
				s.watchQuiet(s.quiet)
			}
		}
		return
	case "message", "message.start", "message.update", "message.stop", "commentary",
		"tool.start", "tool.progress", "tool.end", "todo.update", "notification",
		"message.deleted", "media.offer":
	default:
		if !strings.HasPrefix(f.Type, "picker.") {
			return // replies handled by their requester, and what a person need not see
		}
	}

	lane := frameLane(f)
	if lane != s.lane {
		s.summarise(f, lane)
		return
	}
	var m msgInfo
	f.Decode(&m)
	switch f.Type {
	case "message":
		if s.seen[m.MessageID] || s.wasShown(m.MessageID, m.Text) {
			return
		}
		s.seen[m.MessageID] = true
		if f.ID != 0 && m.Role == "user" {
			return // our own line: it is on screen already
		}
		s.quiet++
		s.printMessage(m, false)
		if m.Role == "assistant" {
			if ft := s.footer(m); ft != "" {
				s.println(ft)
			}
		}
	case "message.start":
		s.quiet++
		if s.cur != nil && s.cur.id == m.MessageID {
			return // a snapshot after reconnecting: the update carries on
		}
		s.streamText(m.MessageID, m.Text)
	case "message.update":
		s.quiet++
		if (s.seen[m.MessageID] || s.wasShown(m.MessageID, m.Text)) && (s.cur == nil || s.cur.id != m.MessageID) {
			return
		}
		s.streamText(m.MessageID, m.Text)
	case "message.stop":
		s.quiet++
		open := s.cur != nil && s.cur.id == m.MessageID
		if !open && (s.seen[m.MessageID] || s.wasShown(m.MessageID, m.FinalText)) {
			return
		}
		s.seen[m.MessageID] = true
		if open {
			s.streamText(m.MessageID, m.FinalText)
			s.endStream()
		} else {
			m.Role = "assistant"
			m.Text = m.FinalText
			reasoning := m.Reasoning
			m.Reasoning = ""
			s.printMessage(m, false)
			m.Reasoning = reasoning
		}
		if m.Reasoning != "" {
			s.println(s.dim("  (thinking) " + oneLine(m.Reasoning, 200)))
		}
		if ft := s.footer(m); ft != "" {
			s.println(ft)
		}
	case "commentary":
		if s.seen[m.MessageID] {
			return
		}
		s.seen[m.MessageID] = true
		s.quiet++
		s.println(s.dim("  · " + indented("  · ", m.Text)))
	case "tool.start", "tool.progress", "tool.end":
		s.quiet++
		var t toolInfo
		f.Decode(&t)
		s.println(s.dim(describeTool(f.Type, t)))
	case "todo.update":
		var p struct {
			Todos []struct {
				Content string `json:"content"`
				Status  string `json:"status"`
			} `json:"todos"`
		}
		f.Decode(&p)
		s.println(s.dim("  todo:"))
		for _, t := range p.Todos {
			mark := map[string]string{"completed": "[x]", "in_progress": "[>]", "cancelled": "[-]"}[t.Status]
			if mark == "" {
				mark = "[ ]"
			}
			s.println(s.dim("    " + mark + " " + t.Content))
		}
	case "notification":
		var n struct {
			Kind  string `json:"kind"`
			Title string `json:"title"`
			Body  string `json:"body"`
		}
		f.Decode(&n)
		s.println(fmt.Sprintf("(%s) %s: %s", n.Kind, n.Title, n.Body))
	case "message.deleted":
		var p struct {
			IDs []string `json:"message_ids"`
		}
		f.Decode(&p)
		s.println(s.dim(fmt.Sprintf("(%d message(s) deleted here)", len(p.IDs))))
	case "media.offer":
		var md mediaInfo
		f.Decode(&md)
		s.println("agent sent a file: " + describeMedia(md) + s.dim(" (open it in the app)"))
	default: // picker.*
		s.println(describePicker(f))
	}
}

func describeTool(typ string, t toolInfo) string {
	glyph := t.Emoji
	if glyph == "" {
		glyph = "⚙"
	}
	switch typ {
	case "tool.start":
		line := "  " + glyph + " " + t.Name
		if t.Preview != "" {
			line += ": " + oneLine(t.Preview, 120)
		}
		return line
	case "tool.progress":
		return "  … " + t.Name + ": " + oneLine(t.Note, 120)
	}
	mark, what := "✓", ""
	if t.OK != nil && !*t.OK {
		mark, what = "✗", " failed"
	}
	line := "  " + mark + " " + t.Name + what
	if t.Duration != nil {
		line += fmt.Sprintf(" (%.1fs)", *t.Duration)
	}
	if t.Output != "" {
		line += ": " + oneLine(t.Output, 120)
	}
	return line
}

func describePicker(f client.Frame) string {
	var p struct {
		Title        string `json:"title"`
		Description  string `json:"description"`
		Command      string `json:"command"`
		CurrentModel string `json:"current_model"`
		Choices      []struct {
			Value     string `json:"value"`
			Label     string `json:"label"`
			IsCurrent bool   `json:"is_current"`
		} `json:"choices"`
	}
	f.Decode(&p)
	title := p.Title
	if title == "" {
		title = strings.TrimPrefix(f.Type, "picker.")
	}
	line := "? " + title
	if p.Description != "" {
		line += ": " + p.Description
	}
	if p.Command != "" {
		line += " [" + p.Command + "]"
	}
	if p.CurrentModel != "" {
		line += " (now " + p.CurrentModel + ")"
	}
	var cs []string
	for _, c := range p.Choices {
		l := c.Label
		if l == "" {
			l = c.Value
		}
		if c.IsCurrent {
			l += " (current)"
		}
		cs = append(cs, l)
	}
	if len(cs) > 0 {
		line += " — " + strings.Join(cs, " | ")
	}
	return line + " (answer it in the app, or with the slash command)"
}

// summarise tells of a frame of another lane in one line.
func (s *chatSession) summarise(f client.Frame, lane client.Lane) {
	var m msgInfo
	f.Decode(&m)
	what := ""
	switch f.Type {
	case "message":
		if f.ID != 0 || s.seen[m.MessageID] {
			return
		}
		s.seen[m.MessageID] = true
		what = "new message"
		if m.Role != "" && m.Role != "user" {
			what = "new " + m.Role + " message"
		}
		what += ": " + oneLine(m.Text, 60)
	case "message.stop":
		if s.seen[m.MessageID] {
			return
		}
		s.seen[m.MessageID] = true
		what = "new reply: " + oneLine(m.FinalText, 60)
	case "notification":
		var n struct {
			Title string `json:"title"`
			Body  string `json:"body"`
		}
		f.Decode(&n)
		what = "notice: " + oneLine(n.Title+": "+n.Body, 60)
	case "media.offer":
		what = "new file"
	default:
		if !strings.HasPrefix(f.Type, "picker.") {
			return // the stream, tools and the rest stay in their lane
		}
		what = "the agent asks you to choose"
	}
	id := lane.ChatID
	if lane.ThreadID != "" {
		id = lane.ThreadID
	}
	s.println(s.dim(fmt.Sprintf("[%s · %s] %s", s.laneName(lane), id, what)))
}

// watchQuiet says the agent is working when a busy lane stays silent.
func (s *chatSession) watchQuiet(gen int) {
	lane := s.lane
	time.AfterFunc(thinkingAfter, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.quiet == gen && s.lane == lane && s.busy[lane] && !s.closed {
			s.println(s.dim("  … the agent is working"))
		}
	})
}

// onState reports connection changes; the client calls it.
func (s *chatSession) onState(connected bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if connected {
		if s.everConnected && !s.connected {
			s.endStream()
			s.println(s.bold("── reconnected ──") + s.dim(" catching up on what was missed"))
		}
		s.connected, s.everConnected, s.lastDropErr = true, true, ""
		return
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) && strings.Contains(ce.Reason, "replaced") {
		// Reconnecting would take the device back and start a tug of war.
		s.fatalErr = fmt.Errorf("another client connected as device %q and took over this chat; "+
			"give each chat its own --device", s.opts.Device)
		s.stop()
		return
	}
	msg := connError(err)
	switch {
	case !s.everConnected:
		if msg != s.lastDropErr {
			s.println(fmt.Sprintf("! cannot connect to %s: %s — retrying…", s.opts.URL, msg))
		}
	case s.connected:
		s.endStream()
		s.println(s.bold("── connection lost ──") + s.dim(" ("+msg+"); reconnecting…"))
	case msg != s.lastDropErr:
		s.println(s.dim("── still offline (" + msg + "); retrying…"))
	}
	s.connected, s.lastDropErr = false, msg
}

// wasShown reports whether history printed message id with this text.
func (s *chatSession) wasShown(id, text string) bool {
	t, ok := s.shown[id]
	return ok && t == text
}

// connError says in a few words why a connection failed or ended.
func connError(err error) string {
	var ce websocket.CloseError
	var se *client.ServerError
	var dns *net.DNSError
	switch {
	case err == nil:
		return "closed"
	case errors.As(err, &ce):
		if ce.Reason != "" {
			return ce.Reason
		}
		return "closed by the gateway: " + ce.Code.String()
	case errors.As(err, &se):
		return se.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused; is the gateway running?"
	case errors.As(err, &dns):
		return "cannot resolve " + dns.Name
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return "the connection was cut"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	return msg
}

// Directory.

func (s *chatSession) entry(chatID string) (chanEntry, bool) {
	for _, e := range s.dir {
		if e.ChatID == chatID {
			return e, true
		}
	}
	return chanEntry{}, false
}

func (s *chatSession) upsert(e chanEntry) {
	for i := range s.dir {
		if s.dir[i].ChatID == e.ChatID {
			s.dir[i] = e
			return
		}
	}
	s.dir = append(s.dir, e)
}

func (s *chatSession) remove(chatID string) {
	out := s.dir[:0]
	for _, e := range s.dir {
		if e.ChatID != chatID && e.ParentChatID != chatID {
			out = append(out, e)
		}
	}
	s.dir = out
}

func (s *chatSession) defaultLane() client.Lane {
	for _, e := range s.dir {
		if e.IsDefault {
			return e.lane()
		}
	}
	return client.Lane{ChatID: "default"}
}

// startLane is the lane named by --chat, or the default channel's.
func (s *chatSession) startLane() (client.Lane, error) {
	if s.opts.Chat == "" {
		return s.defaultLane(), nil
	}
	if e, ok := s.entry(s.opts.Chat); ok {
		return e.lane(), nil
	}
	ids := make([]string, len(s.dir))
	for i, e := range s.dir {
		ids[i] = e.ChatID
	}
	return client.Lane{}, fmt.Errorf("--chat %q: no channel or thread with that id (there are: %s)", s.opts.Chat, strings.Join(ids, ", "))
}

func (s *chatSession) nameOf(e chanEntry) string {
	if e.Name != "" {
		return e.Name
	}
	return e.ChatID
}

// laneName is "#Channel" or "#Channel › Thread".
func (s *chatSession) laneName(l client.Lane) string {
	name := l.ChatID
	if e, ok := s.entry(l.ChatID); ok {
		name = s.nameOf(e)
	}
	name = "#" + name
	if l.ThreadID != "" {
		t := l.ThreadID
		if e, ok := s.entry(l.ThreadID); ok {
			t = s.nameOf(e)
		}
		name += " › " + t
	}
	return name
}

// ordered is the directory as listed: each channel followed by its
// threads, threads whose channel is unknown at the end.
func (s *chatSession) ordered() []chanEntry {
	var out []chanEntry
	placed := make(map[string]bool)
	for _, c := range s.dir {
		if c.isThread() {
			continue
		}
		out = append(out, c)
		for _, t := range s.dir {
			if t.isThread() && t.ParentChatID == c.ChatID {
				out = append(out, t)
				placed[t.ChatID] = true
			}
		}
	}
	for _, t := range s.dir {
		if t.isThread() && !placed[t.ChatID] {
			out = append(out, t)
		}
	}
	return out
}

// printChannels numbers the directory for :join.
func (s *chatSession) printChannels() {
	s.listing = s.ordered()
	s.println(s.bold("Channels") + s.dim("  (:join N to switch; * is where you are)"))
	names := make([]string, len(s.listing))
	width := 0
	for i, e := range s.listing {
		names[i] = s.nameOf(e)
		if e.isThread() {
			names[i] = "  ↳ " + names[i]
		}
		width = max(width, utf8.RuneCountInString(names[i]))
	}
	for i, e := range s.listing {
		mark := " "
		if e.lane() == s.lane {
			mark = "*"
		}
		var notes []string
		if e.IsDefault {
			notes = append(notes, "default channel")
		}
		if e.Automation {
			notes = append(notes, "automation, read-only")
		}
		pad := strings.Repeat(" ", width-utf8.RuneCountInString(names[i]))
		line := fmt.Sprintf(" %s %2d. %s%s  %s", mark, i+1, names[i], pad, s.dim(e.ChatID))
		if len(notes) > 0 {
			line += s.dim("  (" + strings.Join(notes, ", ") + ")")
		}
		s.println(line)
	}
}

// resolve finds what :join names: a number from the last listing, a chat
// id, or a name.
func (s *chatSession) resolve(arg string) (chanEntry, error) {
	if n, err := strconv.Atoi(arg); err == nil {
		if n < 1 || n > len(s.listing) {
			return chanEntry{}, fmt.Errorf("there is no channel %d; :channels lists them", n)
		}
		return s.listing[n-1], nil
	}
	if e, ok := s.entry(arg); ok {
		return e, nil
	}
	var found []chanEntry
	for _, e := range s.dir {
		if strings.EqualFold(e.Name, arg) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return chanEntry{}, fmt.Errorf("no channel or thread %q; :channels lists them", arg)
	}
	return chanEntry{}, fmt.Errorf("several channels are called %q; use the number or the id", arg)
}

// Commands.

func (s *chatSession) request(ctx context.Context, typ string, lane client.Lane, payload any) (client.Frame, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	f, err := s.cl.Request(rctx, typ, lane, payload)
	if errors.Is(err, context.DeadlineExceeded) {
		s.mu.Lock()
		online := s.connected
		s.mu.Unlock()
		if !online {
			return f, errors.New("still offline after " + requestTimeout.String())
		}
		return f, errors.New("the gateway did not answer within " + requestTimeout.String())
	}
	return f, err
}

// fail reports a command that failed, unless the chat is ending anyway.
func (s *chatSession) fail(what string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	s.printf("! %s: %s", what, connError(err))
}

func (s *chatSession) currentLane() client.Lane {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lane
}

const chatHelp = `A line you type goes to the agent (slash commands like /model too).
The chat's own commands start with a colon:
  :channels          list channels and threads, numbered
  :join N|ID|NAME    switch to channel or thread N of the list (or by id or name)
  :new NAME          create a channel
  :thread NAME       create a thread in the current channel
  :history           show older messages of this conversation
  :stop              stop the agent's running turn
  :steer TEXT        redirect the running turn without starting a new one
  :quit              leave (Ctrl-D does too)
  ::text             send a line that itself starts with a colon`

// command handles one line typed by the person; it reports :quit.
func (s *chatSession) command(ctx context.Context, line string) (quit bool) {
	if strings.TrimSpace(line) == "" {
		return false
	}
	if strings.HasPrefix(line, "::") {
		s.send(ctx, line[1:])
		return false
	}
	if r, _ := utf8.DecodeRuneInString(line[min(1, len(line)):]); line[0] != ':' || !unicode.IsLetter(r) {
		s.send(ctx, line) // ":)" and the like are messages
		return false
	}
	name, arg, _ := strings.Cut(line[1:], " ")
	arg = strings.TrimSpace(arg)
	switch strings.ToLower(name) {
	case "quit", "q", "exit":
		return true
	case "help", "h":
		s.printf("%s", chatHelp)
	case "channels", "c", "ls":
		s.channels(ctx)
	case "join", "j":
		if arg == "" {
			s.printf("usage: :join N, :join CHAT_ID or :join NAME")
			return false
		}
		s.join(ctx, arg)
	case "new":
		s.create(ctx, arg, false)
	case "thread":
		s.create(ctx, arg, true)
	case "history":
		lane := s.currentLane()
		s.mu.Lock()
		before, more := s.oldest[lane], s.more[lane]
		s.mu.Unlock()
		if before == "" || !more {
			s.printf("%s", s.dim("(no older messages)"))
			return false
		}
		s.showHistory(ctx, lane, before)
	case "stop":
		lane := s.currentLane()
		if _, err := s.request(ctx, "agent.stop", lane, nil); err != nil {
			s.fail("could not stop", err)
			return false
		}
		s.printf("%s", s.dim("■ stopped; the agent is idle"))
	case "steer":
		if arg == "" {
			s.printf("usage: :steer TEXT")
			return false
		}
		s.mu.Lock()
		lane, busy := s.lane, s.busy[s.lane]
		s.mu.Unlock()
		f, err := s.request(ctx, "agent.steer", lane, map[string]any{"text": arg})
		if err != nil {
			s.fail("could not steer", err)
			return false
		}
		s.markSeen(f)
		if busy {
			s.printf("%s", s.dim("↪ steering: "+oneLine(arg, 80)))
		} else {
			s.printf("%s", s.dim("(nothing was running: sent as a message)"))
		}
	default:
		s.printf("unknown command :%s (type :help; to send a line starting with a colon, type ::)", name)
	}
	return false
}

func (s *chatSession) markSeen(f client.Frame) {
	var m msgInfo
	if f.Decode(&m) == nil && m.MessageID != "" {
		s.mu.Lock()
		s.seen[m.MessageID] = true
		s.mu.Unlock()
	}
}

// send sends text to the current lane.
func (s *chatSession) send(ctx context.Context, text string) {
	s.mu.Lock()
	lane, online, busy := s.lane, s.connected, s.busy[s.lane]
	if !online {
		s.println(s.dim("(offline: it is sent if the connection is back within " + requestTimeout.String() + ")"))
	} else if busy {
		s.println(s.dim("(the agent is still busy here: this runs next; :steer redirects the running turn, :stop ends it)"))
	}
	s.mu.Unlock()
	f, err := s.request(ctx, "message.send", lane, map[string]any{"text": text})
	if err != nil {
		s.fail("not sent", err)
		return
	}
	s.markSeen(f)
}

// refreshDir reloads the channel directory from the gateway.
func (s *chatSession) refreshDir(ctx context.Context) error {
	f, err := s.request(ctx, "channel.list", client.Lane{}, nil)
	if err != nil {
		return err
	}
	var p struct {
		Channels []json.RawMessage `json:"channels"`
	}
	if err := f.Decode(&p); err != nil {
		return err
	}
	s.mu.Lock()
	s.dir = decodeChannels(p.Channels)
	s.mu.Unlock()
	return nil
}

func (s *chatSession) channels(ctx context.Context) {
	err := s.refreshDir(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.println(fmt.Sprintf("! could not list channels (%v); as last known:", err))
	}
	s.printChannels()
}

func (s *chatSession) join(ctx context.Context, arg string) {
	s.mu.Lock()
	e, err := s.resolve(arg)
	s.mu.Unlock()
	if _, nerr := strconv.Atoi(arg); err != nil && nerr != nil && s.refreshDir(ctx) == nil {
		// An id or name: the directory may have changed since.
		s.mu.Lock()
		e, err = s.resolve(arg)
		s.mu.Unlock()
	}
	if err != nil {
		s.printf("! %v", err)
		return
	}
	s.mu.Lock()
	s.endStream()
	s.lane = e.lane()
	s.quiet++
	s.mu.Unlock()
	s.showHistory(ctx, e.lane(), "")
}

func (s *chatSession) create(ctx context.Context, name string, thread bool) {
	what := "channel"
	if thread {
		what = "thread"
	}
	if name == "" {
		s.printf("usage: :%s NAME", map[bool]string{false: "new", true: "thread"}[thread])
		return
	}
	p := map[string]any{"name": name, "kind": "channel"}
	s.mu.Lock()
	parent := s.lane.ChatID
	parentName := s.laneName(client.Lane{ChatID: parent})
	s.mu.Unlock()
	if thread {
		p["kind"], p["parent_chat_id"] = "thread", parent
	}
	f, err := s.request(ctx, "channel.create", client.Lane{}, p)
	if err != nil {
		s.fail("could not create the "+what, err)
		return
	}
	var e chanEntry
	f.Decode(&e)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upsert(e)
	where := ""
	if thread {
		where = " in " + parentName
	}
	s.println(fmt.Sprintf("created %s %q%s (%s) — :join %s to go there", what, e.Name, where, e.ChatID, e.ChatID))
}

// showHistory prints a page of a lane's messages: the newest page, or the
// one before the message before.
func (s *chatSession) showHistory(ctx context.Context, lane client.Lane, before string) {
	p := map[string]any{"limit": historyPage}
	if before != "" {
		p["before_message_id"] = before
	}
	f, err := s.request(ctx, "history", lane, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	name := s.laneName(lane)
	if err != nil {
		s.println(fmt.Sprintf("── %s ── (could not load its history: %v)", name, err))
		return
	}
	var h historyInfo
	f.Decode(&h)
	switch {
	case before != "":
		s.println(s.bold(fmt.Sprintf("── %s · %d older message(s) ──", name, len(h.Messages))))
	case len(h.Messages) == 0:
		s.println(s.bold("── "+name+" ──") + s.dim(" no messages yet"))
	default:
		s.println(s.bold(fmt.Sprintf("── %s · last %d message(s) ──", name, len(h.Messages))))
	}
	for _, m := range h.Messages {
		s.shown[m.MessageID] = m.Text
		s.printMessage(m, true)
	}
	if len(h.Messages) > 0 {
		s.oldest[lane] = h.OldestMessageID
		if s.oldest[lane] == "" {
			s.oldest[lane] = h.Messages[0].MessageID
		}
	}
	s.more[lane] = h.HasMore
	switch {
	case before != "" && h.HasMore:
		s.println(s.dim("── end of the older page; :history shows more ──"))
	case before != "":
		s.println(s.dim("── that was the beginning of " + name + " ──"))
	case h.HasMore:
		s.println(s.dim("   (:history shows older messages)"))
	}
}
