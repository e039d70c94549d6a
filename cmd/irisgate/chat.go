package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// ChatCmd is a terminal chat with the agent: a person's Iris device.
type ChatCmd struct {
	URL         string `help:"WebSocket URL of the gateway." default:"ws://localhost:8787/ws" env:"IRISGATE_URL"`
	Token       string `help:"Device token (required; irisgate pair or token create makes one)." env:"IRISGATE_TOKEN"`
	Device      string `help:"Device id to connect as (default chat-<hostname>). Two chats need two ids."`
	Chat        string `help:"Channel or thread id to start in (default: the default channel)."`
	Color       string `help:"Colours: auto (on a terminal, unless NO_COLOR is set or TERM=dumb), always or never." default:"auto" enum:"auto,always,never" env:"IRISGATE_CHAT_COLOR"`
	HistoryFile string `help:"Where the lines you type are kept across runs (default: irisgate/chat_history in your state directory)." env:"IRISGATE_CHAT_HISTORY"`
	NoHistory   bool   `help:"Keep no history of typed lines on disk."`
}

// Run implements the command.
func (c *ChatCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := chatOptions{URL: c.URL, Token: c.Token, Device: c.Device, Chat: c.Chat, Color: wantColor(c.Color, os.Stdout)}
	if isTerminal(os.Stdin) && isTerminal(os.Stdout) {
		hist := ""
		if !c.NoHistory {
			hist = c.HistoryFile
			if hist == "" {
				hist = defaultHistoryFile()
			}
		}
		return runTerminalChat(ctx, o, os.Stdin, os.Stdout, hist)
	}
	return runChat(ctx, o, os.Stdin, os.Stdout)
}

// wantColor says whether to paint: --color always or never, else on a
// terminal unless NO_COLOR is set to anything (https://no-color.org) or
// the terminal is dumb.
func wantColor(mode string, f *os.File) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	return colorTerminal(f)
}

// colorTerminal reports whether f is a terminal that takes ANSI colours.
func colorTerminal(f *os.File) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
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
	Color  bool   // ANSI colours; off for pipes and tests
	// Interactive says the input is a terminal that echoes what is typed:
	// a typed line, Enter included, is then already on screen.
	Interactive bool
}

// lineSource gives the lines the person types, then io.EOF.
type lineSource interface {
	ReadLine() (string, error)
}

// scanner reads lines from a pipe or a file.
type scanner struct{ sc *bufio.Scanner }

func newScanner(in io.Reader) scanner {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return scanner{sc}
}

func (s scanner) ReadLine() (string, error) {
	if s.sc.Scan() {
		return strings.TrimRight(s.sc.Text(), "\r"), nil
	}
	if err := s.sc.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
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
	return chatLoop(ctx, o, newScanner(in), out)
}

// chatLoop is runChat for any source of typed lines.
func chatLoop(ctx context.Context, o chatOptions, in lineSource, out io.Writer) error {
	return chatLoopWith(ctx, o, in, out, nil)
}

// chatLoopWith is chatLoop that hands the session to onSession before it
// reads the first line.
func chatLoopWith(ctx context.Context, o chatOptions, in lineSource, out io.Writer, onSession func(*chatSession)) error {
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
	if onSession != nil {
		onSession(s)
	}
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

	// hello.ack came through client.Dial, not cleanFrame: cleaned here.
	chans := directory(cleaned(conn.HelloAck()).Channels)
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
			s.handleFrame(cleanFrame(f))
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
		oldest: make(map[client.Lane]string), more: make(map[client.Lane]bool),
		notes: make(map[client.Lane][]laneNote), lastSeen: make(map[client.Lane]string), shownFrom: make(map[client.Lane]int64)}
}

// readLines sends each line of in to lines and closes lines at the end.
func readLines(in lineSource, lines chan<- string, stop <-chan struct{}, s *chatSession) {
	defer close(lines)
	for {
		line, err := in.ReadLine()
		if err != nil {
			if err != io.EOF {
				s.printf("! reading input: %v", err)
			}
			return
		}
		select {
		case lines <- line:
		case <-stop:
			return
		}
	}
}

// typed notes that the terminal has echoed a line the person typed, which
// ended any streamed line on screen: the reply resumes on a line of its own.
func (s *chatSession) typed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.typedLocked()
}

func (s *chatSession) typedLocked() {
	s.midLine = false
	if s.cur != nil {
		s.cur.broken = true // the person's line now sits between
	}
	if e, ok := s.out.(interface{ entered() }); ok {
		e.entered()
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
	if errors.As(err, &se) && se.Code == irisv1.CodeAuth {
		return fmt.Errorf("the gateway at %s refused the token: %s (check --token or IRISGATE_TOKEN)", s.opts.URL, visible(se.Message))
	}
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("connection to %s ended: %s", s.opts.URL, visible(err.Error()))
}

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
	dir           []irisv1.Channel
	listing       []irisv1.Channel  // as last numbered by :channels
	seen          map[string]bool   // finished messages already rendered live
	shown         map[string]string // messages printed from history, with their text
	busy          map[client.Lane]bool
	oldest        map[client.Lane]string // oldest message shown, for :history
	more          map[client.Lane]bool
	notes         map[client.Lane][]laneNote // the gateway's own messages seen, for history pages
	lastSeen      map[client.Lane]string     // each lane's newest message seen, which a note follows
	shownFrom     map[client.Lane]int64      // where the last history page shown began (ms)
	quiet         int                        // bumped by any output of the current lane (for "working…")
	connected     bool
	everConnected bool
	fatalErr      error // why the chat was ended from within
	lastDropErr   string
}

// Output helpers; all need s.mu held except printf.
