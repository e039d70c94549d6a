package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/irisgate/irisgate/client"
)

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
