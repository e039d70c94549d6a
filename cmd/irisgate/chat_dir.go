package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// The channel directory is the gateway's, as irisv1.Channel entries: a
// channel, or a thread (kind thread) of its parent_chat_id.

func isThread(e irisv1.Channel) bool { return e.Kind == "thread" }

// channelLane is the lane an entry's messages are in.
func channelLane(e irisv1.Channel) client.Lane {
	if isThread(e) {
		return client.Lane{ChatID: e.ParentChatID, ThreadID: e.ChatID}
	}
	return client.Lane{ChatID: e.ChatID}
}

// directory is the entries of cs the chat can address: those with an id.
func directory(cs []irisv1.Channel) []irisv1.Channel {
	out := make([]irisv1.Channel, 0, len(cs))
	for _, e := range cs {
		if e.ChatID != "" {
			out = append(out, e)
		}
	}
	return out
}

// Directory.

func (s *chatSession) entry(chatID string) (irisv1.Channel, bool) {
	for _, e := range s.dir {
		if e.ChatID == chatID {
			return e, true
		}
	}
	return irisv1.Channel{}, false
}

func (s *chatSession) upsert(e irisv1.Channel) {
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
			return channelLane(e)
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
		return channelLane(e), nil
	}
	ids := make([]string, len(s.dir))
	for i, e := range s.dir {
		ids[i] = e.ChatID
	}
	return client.Lane{}, fmt.Errorf("--chat %q: no channel or thread with that id (there are: %s)", s.opts.Chat, strings.Join(ids, ", "))
}

func (s *chatSession) nameOf(e irisv1.Channel) string {
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
func (s *chatSession) ordered() []irisv1.Channel {
	var out []irisv1.Channel
	placed := make(map[string]bool)
	for _, c := range s.dir {
		if isThread(c) {
			continue
		}
		out = append(out, c)
		for _, t := range s.dir {
			if isThread(t) && t.ParentChatID == c.ChatID {
				out = append(out, t)
				placed[t.ChatID] = true
			}
		}
	}
	for _, t := range s.dir {
		if isThread(t) && !placed[t.ChatID] {
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
		if isThread(e) {
			names[i] = "  ↳ " + names[i]
		}
		width = max(width, utf8.RuneCountInString(names[i]))
	}
	for i, e := range s.listing {
		mark := " "
		if channelLane(e) == s.lane {
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
func (s *chatSession) resolve(arg string) (irisv1.Channel, error) {
	if n, err := strconv.Atoi(arg); err == nil {
		if n < 1 || n > len(s.listing) {
			return irisv1.Channel{}, fmt.Errorf("there is no channel %d; :channels lists them", n)
		}
		return s.listing[n-1], nil
	}
	if e, ok := s.entry(arg); ok {
		return e, nil
	}
	var found []irisv1.Channel
	for _, e := range s.dir {
		if strings.EqualFold(e.Name, arg) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return irisv1.Channel{}, fmt.Errorf("no channel or thread %q; :channels lists them", arg)
	}
	return irisv1.Channel{}, fmt.Errorf("several channels are called %q; use the number or the id", arg)
}
