package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/irisgate/irisgate/client"
)

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
	var m msgInfo
	f.Decode(&m)
	if f.Type == "message" && m.Role == "system" && m.MessageID != "" {
		s.note(lane, m)
	} else if f.Type == "message" || f.Type == "message.stop" {
		s.saw(lane, m)
	}
	if lane != s.lane {
		s.summarise(f, lane)
		return
	}
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
		line += " [" + visibleLine(p.Command) + "]"
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
		if m.Role != "user" {
			label, _ := s.label(m)
			what = "new message from " + strings.TrimSuffix(label, " › ")
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
func connError(err error) string { return visible(connReason(err)) }

func connReason(err error) string {
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
