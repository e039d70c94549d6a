package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// Frames. Each is decoded as its type's irisv1 payload; a payload that
// does not decode shows what of it did, as the zero value's rest.

// handleFrame renders one frame from the gateway.
func (s *chatSession) handleFrame(f client.Frame) {
	if f.Binary {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f.Type {
	case irisv1.TypeChannelCreated, irisv1.TypeChannelRenamed:
		e, err := client.Payload[irisv1.Channel](f)
		if err != nil || e.ChatID == "" {
			return
		}
		old, had := s.entry(e.ChatID)
		s.upsert(e)
		if f.ID != 0 {
			return // our own request: the command says what happened
		}
		switch {
		case f.Type == irisv1.TypeChannelCreated && !had:
			what := "channel #" + s.nameOf(e)
			if isThread(e) {
				what = "thread " + s.nameOf(e) + " in " + s.laneName(client.Lane{ChatID: e.ParentChatID})
			}
			s.println(s.dim(fmt.Sprintf("+ new %s (%s)", what, e.ChatID)))
		case f.Type == irisv1.TypeChannelRenamed && had && old.Name != e.Name:
			s.println(s.dim(fmt.Sprintf("~ %q is now called %q", old.Name, e.Name)))
		}
	case irisv1.TypeChannelDeleted:
		p, err := client.Payload[irisv1.ChannelDeleted](f)
		if err != nil || p.ChatID == "" {
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
	case irisv1.TypeStatus:
		p, _ := client.Payload[irisv1.Status](f)
		switch p.State {
		case "restarting":
			s.println("! the gateway is restarting; the chat reconnects by itself")
		case "degraded":
			s.println("! the gateway reports it is degraded")
		}
	case irisv1.TypeSyncDone:
		if p, err := client.Payload[irisv1.SyncDone](f); err == nil && p.Truncated {
			s.println(s.dim("(some of what happened while you were away was already pruned; :history shows the conversation)"))
		}
	case irisv1.TypeError:
		if f.ID != 0 {
			return // a reply to a request; the requester reports it
		}
		e, _ := client.Payload[irisv1.Error](f)
		s.println(fmt.Sprintf("! gateway error (%s): %s", e.Code, e.Message))
	case irisv1.TypeAgentBusy, irisv1.TypeAgentIdle:
		lane := f.Lane()
		s.busy[lane] = f.Type == irisv1.TypeAgentBusy
		if lane == s.lane {
			s.quiet++
			if f.Type == irisv1.TypeAgentBusy {
				s.watchQuiet(s.quiet)
			}
		}
	default:
		s.laneFrame(f, f.Lane())
	}
}

// laneFrame renders a frame of a lane's conversation: in full in the
// current lane; from another, as a line that says what came, or not at
// all (the stream, tools and the rest stay in their lane). Replies
// handled by their requester, and what a person need not see, show
// nothing.
func (s *chatSession) laneFrame(f client.Frame, lane client.Lane) {
	here := lane == s.lane
	switch f.Type {
	case irisv1.TypeMessage:
		m, _ := client.Payload[irisv1.Message](f)
		if m.Role == "system" && m.MessageID != "" {
			s.note(lane, m)
		} else {
			s.saw(lane, m)
		}
		if !here {
			if f.ID != 0 || s.seen[m.MessageID] {
				return
			}
			s.seen[m.MessageID] = true
			what := "new message"
			if m.Role != "user" {
				label, _ := s.label(m)
				what = "new message from " + strings.TrimSuffix(label, " › ")
			}
			s.summarise(lane, what+": "+oneLine(m.Text, 60))
			return
		}
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
	case irisv1.TypeMessageStop:
		p, _ := client.Payload[irisv1.MessageStop](f)
		s.stopped(lane, here, p)
	case irisv1.TypeNotification:
		n, _ := client.Payload[irisv1.Notification](f)
		if !here {
			s.summarise(lane, "notice: "+oneLine(n.Title+": "+n.Body, 60))
			return
		}
		s.println(fmt.Sprintf("(%s) %s: %s", n.Kind, n.Title, n.Body))
	case irisv1.TypeMediaOffer:
		if !here {
			s.summarise(lane, "new file")
			return
		}
		md, _ := client.Payload[irisv1.Media](f)
		s.println("agent sent a file: " + describeMedia(md) + s.dim(" (open it in the app)"))
	case irisv1.TypeMessageStart, irisv1.TypeMessageUpdate, irisv1.TypeCommentary, irisv1.TypeToolStart,
		irisv1.TypeToolProgress, irisv1.TypeToolEnd, irisv1.TypeTodoUpdate, irisv1.TypeMessageDeleted:
		if here {
			s.liveFrame(f)
		}
	default:
		if !strings.HasPrefix(f.Type, irisv1.PickerPrefix) {
			return
		}
		if !here {
			s.summarise(lane, "the agent asks you to choose")
			return
		}
		s.println(describePicker(f))
	}
}

// stopped renders a reply's message.stop: the end of its stream, or the
// whole reply when its stream was not seen (another lane's, a replay).
func (s *chatSession) stopped(lane client.Lane, here bool, p irisv1.MessageStop) {
	m := irisv1.Message{MessageID: p.MessageID, Role: "assistant", Text: p.FinalText, Media: p.Media,
		Model: p.Model, Tokens: p.Tokens, Runtime: p.Runtime, TS: p.TS}
	s.saw(lane, m)
	if !here {
		if !s.seen[m.MessageID] {
			s.seen[m.MessageID] = true
			s.summarise(lane, "new reply: "+oneLine(m.Text, 60))
		}
		return
	}
	s.quiet++
	open := s.cur != nil && s.cur.id == m.MessageID
	if !open && (s.seen[m.MessageID] || s.wasShown(m.MessageID, m.Text)) {
		return
	}
	s.seen[m.MessageID] = true
	if open {
		s.streamText(m.MessageID, m.Text)
		s.endStream()
	} else {
		s.printMessage(m, false) // the reasoning goes below, as on a stream
	}
	if p.Reasoning != "" {
		s.println(s.dim("  (thinking) " + oneLine(p.Reasoning, 200)))
	}
	if ft := s.footer(m); ft != "" {
		s.println(ft)
	}
}

// liveFrame renders what the agent does in the current lane as it does it.
func (s *chatSession) liveFrame(f client.Frame) {
	switch f.Type {
	case irisv1.TypeMessageStart:
		p, _ := client.Payload[irisv1.MessageStart](f)
		s.quiet++
		if s.cur != nil && s.cur.id == p.MessageID {
			return // a snapshot after reconnecting: the update carries on
		}
		s.streamText(p.MessageID, "")
	case irisv1.TypeMessageUpdate:
		p, _ := client.Payload[irisv1.MessageUpdate](f)
		s.quiet++
		if (s.seen[p.MessageID] || s.wasShown(p.MessageID, p.Text)) && (s.cur == nil || s.cur.id != p.MessageID) {
			return
		}
		s.streamText(p.MessageID, p.Text)
	case irisv1.TypeCommentary:
		p, _ := client.Payload[irisv1.Commentary](f)
		if s.seen[p.MessageID] {
			return
		}
		s.seen[p.MessageID] = true
		s.quiet++
		s.println(s.dim("  · " + indented("  · ", p.Text)))
	case irisv1.TypeToolStart:
		s.quiet++
		t, _ := client.Payload[irisv1.ToolStart](f)
		glyph := t.Emoji
		if glyph == "" {
			glyph = "⚙"
		}
		line := "  " + glyph + " " + t.Name
		if t.Preview != "" {
			line += ": " + oneLine(t.Preview, 120)
		}
		s.println(s.dim(line))
	case irisv1.TypeToolProgress:
		s.quiet++
		t, _ := client.Payload[irisv1.ToolProgress](f)
		s.println(s.dim("  … " + t.Name + ": " + oneLine(t.Note, 120)))
	case irisv1.TypeToolEnd:
		s.quiet++
		t, _ := client.Payload[irisv1.ToolEnd](f)
		s.println(s.dim(toolEnded(t)))
	case irisv1.TypeTodoUpdate:
		p, _ := client.Payload[irisv1.TodoUpdate](f)
		s.println(s.dim("  todo:"))
		for _, t := range p.Todos {
			mark := map[string]string{"completed": "[x]", "in_progress": "[>]", "cancelled": "[-]"}[t.Status]
			if mark == "" {
				mark = "[ ]"
			}
			s.println(s.dim("    " + mark + " " + t.Content))
		}
	case irisv1.TypeMessageDeleted:
		p, _ := client.Payload[irisv1.MessageDeleted](f)
		s.println(s.dim(fmt.Sprintf("(%d message(s) deleted here)", len(p.MessageIDs))))
	}
}

// toolEnded is a tool.end's line: ok and duration are always there (the
// schema requires them).
func toolEnded(t irisv1.ToolEnd) string {
	mark, what := "✓", ""
	if !t.OK {
		mark, what = "✗", " failed"
	}
	line := "  " + mark + " " + t.Name + what + fmt.Sprintf(" (%.1fs)", t.Duration)
	if t.OutputPreview != "" {
		line += ": " + oneLine(t.OutputPreview, 120)
	}
	return line
}

// describePicker is a picker's question on one line. Four kinds carry the
// same members (Go converts between them); picker.model only a title and
// the current model; a kind irisv1 does not know yet is read as a choice.
func describePicker(f client.Frame) string {
	var p irisv1.PickerChoice
	current := ""
	switch f.Type {
	case irisv1.TypePickerModel:
		m, _ := client.Payload[irisv1.PickerModel](f)
		p.Title, current = m.Title, m.CurrentModel
	case irisv1.TypePickerClarify:
		c, _ := client.Payload[irisv1.PickerClarify](f)
		p = irisv1.PickerChoice(c)
	case irisv1.TypePickerApproval:
		a, _ := client.Payload[irisv1.PickerApproval](f)
		p = irisv1.PickerChoice(a)
	case irisv1.TypePickerConfirm:
		c, _ := client.Payload[irisv1.PickerConfirm](f)
		p = irisv1.PickerChoice(c)
	default:
		p, _ = client.Payload[irisv1.PickerChoice](f)
	}
	title := p.Title
	if title == "" {
		title = strings.TrimPrefix(f.Type, irisv1.PickerPrefix)
	}
	line := "? " + title
	if p.Description != "" {
		line += ": " + p.Description
	}
	if p.Command != "" {
		line += " [" + visibleLine(p.Command) + "]"
	}
	if current != "" {
		line += " (now " + current + ")"
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

// summarise tells in one line of what came in another lane.
func (s *chatSession) summarise(lane client.Lane, what string) {
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
