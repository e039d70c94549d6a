package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/irisgate/irisgate/proto/irisv1"
)

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
	if strings.HasPrefix(line, "! ") {
		line = s.alert(line)
	}
	s.write(line + "\n")
}

// printf prints one line, taking the lock.
func (s *chatSession) printf(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.println(fmt.Sprintf(format, a...))
}

// ANSI styles (SGR parameters).
const (
	styleDim    = "2"
	styleBold   = "1"
	styleYou    = "1;36" // bold cyan
	styleAgent  = "1;32" // bold green
	styleCron   = "1;33" // bold yellow
	styleScript = "1;35" // bold magenta
	styleSystem = "1;34" // bold blue: the gateway itself
	styleError  = "1;31" // bold red
)

// paint wraps str in an ANSI style when colour is on.
func paint(color bool, style, str string) string {
	if !color || str == "" {
		return str
	}
	return "\x1b[" + style + "m" + str + "\x1b[0m"
}

func (s *chatSession) dim(str string) string  { return paint(s.color, styleDim, str) }
func (s *chatSession) bold(str string) string { return paint(s.color, styleBold, str) }

// alert is a line about something that went wrong: "! …".
func (s *chatSession) alert(str string) string { return paint(s.color, styleError, str) }

// label is the label before a message's text, plain and painted. Every
// role is its own: a cron job's post names the job (its model is "cron:
// NAME"), and a delivery (irisgate send, POST /api/send, a phone's
// deliver: role cron without a job, model "delivery") is a script's.
func (s *chatSession) label(m irisv1.Message) (plain, painted string) {
	var name, style string
	job, isCron := strings.CutPrefix(m.Model, "cron: ")
	switch {
	case m.Role == "user":
		name, style = "you", styleYou
	case m.Role == "system":
		name, style = "system", styleSystem
	// History knows only user and assistant: there a cron post is an
	// assistant message whose model is "cron: NAME", and a delivery one
	// whose model is "delivery".
	case (m.Role == "cron" || m.Role == "assistant") && isCron && job != "":
		name, style = "cron "+oneLine(job, 40), styleCron
	case m.Role == "cron" || m.Role == "assistant" && m.Model == "delivery":
		name, style = "script", styleScript
	case m.Role == "assistant" || m.Role == "":
		name, style = "agent", styleAgent
	default:
		name, style = oneLine(m.Role, 20), styleBold
	}
	plain = name + " › "
	return plain, paint(s.color, style, plain)
}

// agentLabel is the label of a streaming reply.
func (s *chatSession) agentLabel() (plain, painted string) {
	return s.label(irisv1.Message{Role: "assistant"})
}

// indented lays out text under a label: continuation lines line up with
// the first line's text.
func indented(label, text string) string {
	pad := "\n" + strings.Repeat(" ", utf8.RuneCountInString(label))
	return strings.ReplaceAll(text, "\n", pad)
}

func (s *chatSession) printMessage(m irisv1.Message, when bool) {
	label, painted := s.label(m)
	prefix, stamp := "", ""
	if when && m.TS > 0 {
		stamp = clock(m.TS) + " "
		prefix = s.dim(stamp)
	}
	if m.Reasoning != "" {
		s.println(prefix + s.dim("(thinking) "+oneLine(m.Reasoning, 200)))
	}
	s.println(prefix + painted + indented(stamp+label, m.Text))
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

func describeMedia(m irisv1.Media) string {
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
func (s *chatSession) footer(m irisv1.Message) string {
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
		_, painted := s.agentLabel()
		s.write(painted)
		s.midLine = true
	}
	if !strings.HasPrefix(text, st.printed) {
		// The text was revised rather than extended: show it anew.
		s.breakLine()
		_, painted := s.agentLabel()
		s.write(painted + s.dim("(revised) "))
		s.midLine = true
		st.printed, st.pending, st.broken = "", "", false
	}
	add := text[len(st.printed):]
	if add == "" {
		return
	}
	if st.broken {
		s.breakLine()
		_, painted := s.agentLabel()
		s.write(painted + s.dim("… "))
		s.midLine = true
		st.broken, st.pending = false, "" // a fresh line needs no held-back break
	}
	st.printed = text
	all := st.pending + add
	shown := strings.TrimRight(all, "\n")
	st.pending = all[len(shown):]
	label, _ := s.agentLabel()
	s.write(indented(label, shown))
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
