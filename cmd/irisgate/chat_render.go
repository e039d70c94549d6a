package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
