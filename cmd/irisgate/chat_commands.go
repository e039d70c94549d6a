package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// Commands.

func (s *chatSession) request(ctx context.Context, typ string, lane client.Lane, payload any) (client.Frame, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	f, err := s.cl.Request(rctx, typ, lane, payload)
	f = cleanFrame(f)
	var se *client.ServerError
	if errors.As(err, &se) {
		c := cleaned(*se) // the client decoded it from the frame as it came
		err = &c
	}
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
  :new NAME          create a channel and go there
  :thread NAME       create a thread in the current channel and go there
  :history           show older messages of this conversation
  :stop              stop the agent's running turn
  :steer TEXT        redirect the running turn without starting a new one
  :quit              leave (Ctrl-D or Ctrl-C on the prompt too)
  ::text             send a line that itself starts with a colon
On a terminal: ←/→, Home/End, Ctrl-A/E/K/U/W edit the line, ↑/↓ recall lines
(kept across runs; a line typed with a leading space is not kept).`

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
		if _, err := s.request(ctx, irisv1.TypeAgentStop, lane, irisv1.AgentStop{}); err != nil {
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
		f, err := s.request(ctx, irisv1.TypeAgentSteer, lane, irisv1.AgentSteer{Text: arg})
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

// markSeen notes the message a request was answered with (message.send's
// and agent.steer's echo), which the event stream brings too.
func (s *chatSession) markSeen(f client.Frame) {
	if m, err := client.Payload[irisv1.Message](f); err == nil && m.MessageID != "" {
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
	f, err := s.request(ctx, irisv1.TypeMessageSend, lane, irisv1.MessageSend{Text: text})
	if err != nil {
		s.fail("not sent", err)
		return
	}
	s.markSeen(f)
}

// refreshDir reloads the channel directory from the gateway.
func (s *chatSession) refreshDir(ctx context.Context) error {
	f, err := s.request(ctx, irisv1.TypeChannelList, client.Lane{}, irisv1.ChannelListRequest{})
	if err != nil {
		return err
	}
	p, err := client.Payload[irisv1.ChannelList](f)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.dir = directory(p.Channels)
	s.mu.Unlock()
	return nil
}

func (s *chatSession) channels(ctx context.Context) {
	err := s.refreshDir(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.println(fmt.Sprintf("! could not list channels (%s); as last known:", visible(err.Error())))
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
	s.goTo(ctx, e)
}

// create makes a channel, or a thread in the current channel, and goes
// there, as an app does.
func (s *chatSession) create(ctx context.Context, name string, thread bool) {
	what := "channel"
	if thread {
		what = "thread"
	}
	if name == "" {
		s.printf("usage: :%s NAME", map[bool]string{false: "new", true: "thread"}[thread])
		return
	}
	p := irisv1.ChannelCreate{Name: &name, Kind: "channel"}
	s.mu.Lock()
	parent := s.lane.ChatID
	parentName := s.laneName(client.Lane{ChatID: parent})
	s.mu.Unlock()
	if thread {
		p.Kind, p.ParentChatID = "thread", &parent
	}
	f, err := s.request(ctx, irisv1.TypeChannelCreate, client.Lane{}, p)
	if err != nil {
		s.fail("could not create the "+what, err)
		return
	}
	e, _ := client.Payload[irisv1.Channel](f) // channel.created
	if e.ChatID == "" {
		s.printf("! the gateway answered channel.create without a chat_id")
		return
	}
	s.mu.Lock()
	s.upsert(e)
	where := ""
	if thread {
		where = " in " + parentName
	}
	s.println(fmt.Sprintf("created %s %q%s (%s); you are in it now", what, e.Name, where, e.ChatID))
	s.mu.Unlock()
	s.goTo(ctx, e)
}

// goTo makes e the current lane and shows its latest messages.
func (s *chatSession) goTo(ctx context.Context, e irisv1.Channel) {
	lane := channelLane(e)
	s.mu.Lock()
	s.endStream()
	s.lane = lane
	s.quiet++
	s.mu.Unlock()
	s.showHistory(ctx, lane, "")
}

// showHistory prints a page of a lane's messages: the newest page, or the
// one before the message before.
func (s *chatSession) showHistory(ctx context.Context, lane client.Lane, before string) {
	f, err := s.request(ctx, irisv1.TypeHistory, lane, irisv1.HistoryRequest{Limit: historyPage, BeforeMessageID: before})
	s.mu.Lock()
	defer s.mu.Unlock()
	name := s.laneName(lane)
	if err != nil {
		s.println(fmt.Sprintf("── %s ── (could not load its history: %s)", name, visible(err.Error())))
		return
	}
	h, _ := client.Payload[irisv1.History](f)
	msgs := s.withNotes(lane, h, before != "")
	switch {
	case before != "":
		s.println(s.bold(fmt.Sprintf("── %s · %d older message(s) ──", name, len(msgs))))
	case len(msgs) == 0:
		s.println(s.bold("── "+name+" ──") + s.dim(" no messages yet"))
	default:
		s.println(s.bold(fmt.Sprintf("── %s · last %d message(s) ──", name, len(msgs))))
	}
	for _, m := range msgs {
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

// maxNotes is how many of the gateway's own messages the chat keeps per
// lane to show in history pages.
const maxNotes = 200

// note keeps a message from the gateway itself (a command's reply, a
// failed turn): the gateway keeps those out of history, which holds the
// conversation, so the chat puts the ones it saw back into the pages it
// shows, where the command that asked for them is.
func (s *chatSession) note(lane client.Lane, m irisv1.Message) {
	ns := s.notes[lane]
	for _, n := range ns {
		if n.MessageID == m.MessageID {
			return
		}
	}
	if len(ns) >= maxNotes {
		ns = ns[1:]
	}
	s.notes[lane] = append(ns, laneNote{Message: m, after: s.lastSeen[lane]})
}

// laneNote is a gateway message kept for history pages, with the message
// it came after: timestamps are milliseconds, and a command's reply and
// the next message often share one.
type laneNote struct {
	irisv1.Message
	after string // the lane's newest message seen when it came
}

// saw records the newest message of a lane, which a note that comes next
// follows.
func (s *chatSession) saw(lane client.Lane, m irisv1.Message) {
	if m.MessageID != "" && m.Role != "system" {
		s.lastSeen[lane] = m.MessageID
	}
}

// withNotes is a history page with the notes of its time put in, by
// timestamp. A page covers from its first message (from the beginning
// when it is the last page) up to where the page shown before it began
// (to now for the newest).
func (s *chatSession) withNotes(lane client.Lane, h irisv1.History, older bool) []irisv1.Message {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if h.HasMore && len(h.Messages) > 0 {
		lo = h.Messages[0].TS
	}
	if from, ok := s.shownFrom[lane]; ok && older {
		hi = from
	}
	s.shownFrom[lane] = lo
	in := make(map[string]bool, len(h.Messages))
	for _, m := range h.Messages {
		in[m.MessageID] = true
	}
	// A note goes right after the message it came after when that is on
	// the page, else where its time puts it.
	following := map[string][]irisv1.Message{}
	var loose []irisv1.Message
	for _, n := range s.notes[lane] {
		switch {
		case n.TS < lo || n.TS >= hi || in[n.MessageID]:
		case in[n.after]:
			following[n.after] = append(following[n.after], n.Message)
		default:
			loose = append(loose, n.Message)
		}
	}
	if len(following) == 0 && len(loose) == 0 {
		return h.Messages
	}
	out := make([]irisv1.Message, 0, len(h.Messages)+len(following)+len(loose))
	for _, m := range h.Messages {
		out = append(out, m)
		out = append(out, following[m.MessageID]...)
	}
	if len(loose) == 0 {
		return out
	}
	out = append(out, loose...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].TS < out[j].TS })
	return out
}
