package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// lane is the runtime state of one conversation: the turns waiting to run,
// the running one, and the todo list.
type lane struct {
	key     core.Lane
	pending []pendingTurn
	running *turn
	active  bool // a goroutine is running the lane's turns
	todos   []core.Todo
	// reserved counts places held in pending for turns being stored
	// (reserveTurn): the bound holds across concurrent senders.
	reserved int
}

// MaxQueuedTurns bounds the messages of people waiting in one lane for
// their turn (the running one aside). A message beyond it is refused
// before it is stored, so what a restart reloads is bounded too. Cron runs
// are not counted: they collapse to one waiting run per job.
const MaxQueuedTurns = 32

// queuedLocked counts the people's turns waiting in l; g.mu is held.
func (l *lane) queuedLocked() int {
	n := l.reserved
	for _, pt := range l.pending {
		if pt.cron == nil {
			n++
		}
	}
	return n
}

// idleLocked reports whether nothing keeps l in the lanes map.
func (l *lane) idleLocked() bool {
	return !l.active && len(l.pending) == 0 && l.reserved == 0 && len(l.todos) == 0
}

// errQueueFull refuses a message when its lane's queue is full.
var errQueueFull = core.Errorf(core.CodeRateLimited,
	"%d messages already wait in this chat for the agent: wait for them, or send /stop all to stop the turn and drop them", MaxQueuedTurns)

// reserveTurn holds a place in lk's queue for a turn about to be stored;
// the caller then either enqueues it (enqueueReserved) or gives the place
// back (releaseTurn).
func (g *Gateway) reserveTurn(lk core.Lane) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		return errShuttingDown
	}
	l := g.lanes[lk]
	if l == nil {
		l = &lane{key: lk}
		g.lanes[lk] = l
	}
	if l.queuedLocked() >= MaxQueuedTurns {
		g.cfg.Metrics.Limited.WithLabelValues("lane_queue").Inc()
		return errQueueFull
	}
	l.reserved++
	return nil
}

// queueFull reports whether lk's queue has no room (reserveTurn decides;
// this is a cheap look before any work).
func (g *Gateway) queueFull(lk core.Lane) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.lanes[lk]
	return l != nil && l.queuedLocked() >= MaxQueuedTurns
}

// releaseTurn gives back a place reserveTurn held.
func (g *Gateway) releaseTurn(lk core.Lane) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.lanes[lk]; l != nil {
		l.reserved--
		if l.idleLocked() {
			delete(g.lanes, lk)
		}
	}
}

// enqueueReserved queues a turn in the place reserveTurn held for it.
func (g *Gateway) enqueueReserved(pt pendingTurn) error {
	g.mu.Lock()
	if l := g.lanes[pt.msg.Lane]; l != nil {
		l.reserved--
	}
	g.mu.Unlock()
	return g.enqueue(pt)
}

// dropQueued forgets the turns waiting in lk (not the running one): their
// messages stay in history, unanswered. It returns how many of them were
// people's.
func (g *Gateway) dropQueued(ctx context.Context, lk core.Lane) (int, error) {
	g.mu.Lock()
	var dropped []pendingTurn
	if l := g.lanes[lk]; l != nil {
		dropped, l.pending = l.pending, nil
	}
	g.mu.Unlock()
	if len(dropped) == 0 {
		return 0, nil
	}
	people := 0
	err := g.commit(ctx, func(tx *store.Tx) error {
		for _, pt := range dropped {
			if err := tx.EndTurn(pt.msg.ID); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	for _, pt := range dropped {
		if pt.cron != nil {
			pt.cron.done(errCronStopped)
		} else {
			people++
		}
	}
	return people, err
}

type pendingTurn struct {
	msg    core.Message
	origin *hub.Conn // gets the read receipt; nil for turns no device asked for
	// cron, when set, makes it a cron turn (runCronTurn): msg is then no
	// stored message but the turn's row id (store.CronTurnID) and prompt.
	cron *cronRun
}

// turn is a running turn. Its stream fields are read by greet for devices
// that join mid-turn.
type turn struct {
	cancel context.CancelFunc
	steer  chan agent.Steer

	mu       sync.Mutex
	ran      bool // the agent returned: steering no longer reaches it
	ended    bool // its agent.idle is going out: later stops are answered apart
	stopping bool // a person stopped it: the steering sent for it ends too
	stopReqs []core.ReplyAddr
	// steered is the steering handed to the agent, oldest first. Each is
	// also an owed turn in the store (QueueTurn) until the turn consumes
	// it, so a restart answers what the agent never took.
	steered  []pendingTurn
	streamID string
	text     string
}

// steeredBy reports whether id is steering handed to this turn, which the
// agent records once it takes it (agent.Turn.Steer).
func (t *turn) steeredBy(id string) bool {
	if id == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pt := range t.steered {
		if pt.msg.ID == id {
			return true
		}
	}
	return false
}

// closeSteering ends the turn's steering once the agent has returned (or
// will never run). It returns the steering the agent did not take, oldest
// first, and the ids of what it took.
func (t *turn) closeSteering() (untaken []pendingTurn, taken []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ran = true
	// The channel holds the newest steers, those the agent did not take.
	n := len(t.steer)
	for range n {
		<-t.steer
	}
	cut := len(t.steered) - n
	for _, pt := range t.steered[:cut] {
		taken = append(taken, pt.msg.ID)
	}
	return t.steered[cut:], taken
}

func (t *turn) snapshot() (id, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.streamID, t.text
}

// enqueue adds a turn to its lane and starts the lane if it was idle.
func (g *Gateway) enqueue(pt pendingTurn) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		return errShuttingDown
	}
	l := g.lanes[pt.msg.Lane]
	if l == nil {
		l = &lane{key: pt.msg.Lane}
		g.lanes[pt.msg.Lane] = l
	}
	l.pending = append(l.pending, pt)
	if !l.active {
		l.active = true
		g.turns.Add(1)
		go g.runLane(l)
	}
	return nil
}

func (g *Gateway) runLane(l *lane) {
	defer g.turns.Done()
	for {
		g.mu.Lock()
		if len(l.pending) == 0 || g.down {
			l.active = false
			l.pending = nil
			if l.idleLocked() {
				delete(g.lanes, l.key)
			}
			g.mu.Unlock()
			return
		}
		pt := l.pending[0]
		l.pending = l.pending[1:]
		ctx, cancel := context.WithCancel(g.ctx)
		t := &turn{cancel: cancel}
		if pt.cron == nil {
			// A cron turn gets no steer channel: Steer then queues what a
			// person sends as a turn of its own, which the cron prompt,
			// not a conversation, would not take anyway.
			t.steer = make(chan agent.Steer, 8)
		}
		l.running = t
		g.mu.Unlock()

		var next []pendingTurn
		if pt.cron != nil {
			g.runCronTurn(ctx, l, t, pt)
		} else {
			next = g.runTurn(ctx, l, t, pt)
		}
		cancel()

		g.mu.Lock()
		l.running = nil
		l.pending = slices.Concat(next, l.pending)
		g.mu.Unlock()
	}
}

// runTurn runs one agent turn and turns what the agent reports into
// events. Everything a device must not miss is committed before it is
// published; the stream itself (start, updates, tools) is ephemeral. It
// returns the steering messages the agent ended without taking: they run
// next, as turns of their own.
func (g *Gateway) runTurn(ctx context.Context, l *lane, t *turn, pt pendingTurn) []pendingTurn {
	start := time.Now()
	lk := l.key
	// Final writes use their own context: a stopped turn must still record
	// its partial reply.
	fin := context.Background()

	if pt.origin != nil {
		pt.origin.SendEvent(&core.Event{Type: core.EvReadReceipt, Lane: lk, MessageIDs: []string{pt.msg.ID}, TS: start.UnixMilli()}, 0)
	}
	if err := g.commit(fin, func(tx *store.Tx) error { return tx.StartTurn(pt.msg.ID) },
		&core.Event{Type: core.EvAgentBusy, Lane: lk, Reason: "processing"}); err != nil {
		g.log.Error("turn: agent.busy", "lane", lk.String(), "err", err)
		// Steering may already wait in the channel: no agent will take
		// it, so it runs next like any steering this turn did not take.
		next, _ := t.closeSteering()
		return next
	}
	// A lane whose settings or conversation cannot be read does not run
	// (the turn fails below, and says why): the model would otherwise
	// answer without the context the person sees.
	settings, err := g.st.LaneSettings(fin, lk)
	var history []agent.Msg
	if err == nil {
		history, err = g.loadConversation(fin, lk)
	}
	if err != nil {
		g.log.Error("turn: reading the lane's state", "lane", lk.String(), "err", err)
		err = fmt.Errorf("this lane's stored state cannot be read (%w); /new starts a fresh conversation", err)
	}
	// The reply's id is known before it starts streaming so the
	// conversation entries of the turn can be tied to it: deleting the
	// reply deletes what the model said and did for it.
	replyID := core.NewID("m_")
	record := func(m agent.Msg) {
		tag := m.MessageID
		if tag == "" {
			tag = replyID
		}
		// A steer the agent records is consumed by this turn: it stops
		// being owed in the same commit that puts it in the conversation,
		// so a crash either side of it neither loses it nor answers it
		// twice.
		consumed := t.steeredBy(m.MessageID)
		err := g.commit(fin, func(tx *store.Tx) error {
			if err := tx.AppendConversation(lk, tag, entryOf(m)); err != nil {
				return err
			}
			if consumed {
				return tx.EndTurn(m.MessageID)
			}
			return nil
		}, nil)
		if err != nil {
			g.log.Error("turn: recording the conversation", "lane", lk.String(), "err", err)
		}
	}
	g.publish(&core.Event{Type: core.EvTyping, Lane: lk, On: true})

	var (
		reasoning  strings.Builder
		model      string
		tokens     int
		contextPct *int
		cost       *float64
		started    bool
		startErr   error
		cwd        string
		lastSave   = start
		files      []core.Media // sent by the agent, listed in the reply
	)
	// begin starts the reply's bubble: at its first text, or at a file
	// the agent sends before any text, which the reply then carries.
	begin := func() {
		if started {
			return
		}
		started = true
		id := replyID
		m := core.Message{ID: id, Lane: lk, Role: core.RoleAssistant, TS: time.Now().UnixMilli()}
		t.mu.Lock()
		t.streamID = id
		t.mu.Unlock()
		startErr = g.commit(fin, func(tx *store.Tx) error { return tx.InsertMessage(m, true) },
			&core.Event{Type: core.EvMessageStart, Lane: lk, StreamID: id, Role: core.RoleAssistant})
	}
	emit := func(e agent.Event) {
		switch e.Kind {
		case agent.Text:
			begin()
			t.mu.Lock()
			t.text += e.Text
			id, text := t.streamID, t.text
			t.mu.Unlock()
			g.publish(&core.Event{Type: core.EvMessageUpdate, Lane: lk, StreamID: id, Text: text})
			if time.Since(lastSave) >= g.cfg.ProgressEvery {
				lastSave = time.Now()
				r := reasoning.String()
				g.commitLater(func(tx *store.Tx) error { return tx.SaveProgress(id, text, r) })
			}
		case agent.Reasoning:
			reasoning.WriteString(e.Text)
		case agent.Commentary:
			g.commit(fin, nil, &core.Event{Type: core.EvCommentary, Lane: lk, StreamID: core.NewID("m_"), Text: e.Text})
		case agent.TextIsCommentary:
			// What streamed so far was the model thinking aloud before its
			// tools: it becomes a commentary beat and the bubble starts over.
			t.mu.Lock()
			text, id := t.text, t.streamID
			t.text = ""
			t.mu.Unlock()
			if text == "" {
				text = e.Text
			}
			if started {
				g.publish(&core.Event{Type: core.EvMessageUpdate, Lane: lk, StreamID: id, Text: ""})
			}
			if strings.TrimSpace(text) != "" {
				g.commit(fin, nil, &core.Event{Type: core.EvCommentary, Lane: lk, StreamID: core.NewID("m_"), Text: text})
			}
		case agent.File:
			// The file is stored and offered at once (a media.offer tied
			// to the reply); the reply lists it when it finishes.
			begin()
			md, err := g.offerFile(fin, lk, replyID, e.Path)
			if startErr == nil && err == nil {
				files = append(files, md)
				break
			}
			if err == nil {
				err = startErr
			}
			g.log.Warn("turn: offering a file", "lane", lk.String(), "path", e.Path, "err", err)
			why := err.Error()
			var ce *core.Error
			if errors.As(err, &ce) {
				why = ce.Message
			}
			g.systemMessage(fin, lk, "📎 The agent's file "+homeRelative(e.Path)+" could not be offered: "+why)
		case agent.ToolStart, agent.ToolProgress:
			typ := core.EvToolStart
			if e.Kind == agent.ToolProgress {
				typ = core.EvToolProgress
			}
			g.publish(&core.Event{Type: typ, Lane: lk, Tool: e.Tool})
		case agent.ToolEnd:
			g.commit(fin, nil, &core.Event{Type: core.EvToolEnd, Lane: lk, Tool: e.Tool})
		case agent.Todos:
			g.mu.Lock()
			l.todos = e.Todos
			g.mu.Unlock()
			g.publish(&core.Event{Type: core.EvTodo, Lane: lk, Todos: e.Todos})
		case agent.Usage:
			if e.Model != "" {
				model = e.Model
			}
			tokens += e.Tokens
			if e.ContextPct != nil {
				contextPct = e.ContextPct
			}
			if e.Cost != nil {
				cost = e.Cost
			}
			if e.Cwd != "" {
				cwd = homeRelative(e.Cwd)
			}
		}
	}

	g.mu.Lock()
	todos := l.todos
	g.mu.Unlock()
	if err == nil {
		err = g.cfg.Agent.Run(ctx, agent.Turn{
			Lane: lk, Input: pt.msg.Text, InputID: pt.msg.ID, Media: g.withPaths(pt.msg.Media), Steer: t.steer,
			Settings: g.agentSettings(lk, settings), History: history, Record: record, Cwd: g.cfg.Workdir,
			Asker: laneAsker{g: g, lane: lk}, Todos: todos, Cron: agentCron{g},
		}, emit)
	}
	stopped := ctx.Err() != nil
	untaken, forget := t.closeSteering()
	// What the agent took is settled with the turn (its rows go with the
	// turn's own; those it recorded are gone already). What it did not
	// take runs next; a person's stop ends it too, and a shutdown leaves
	// it owed in the store, for the next start to answer.
	var next []pendingTurn
	t.mu.Lock()
	personStop := t.stopping
	t.mu.Unlock()
	switch {
	case !stopped:
		next = untaken
	case personStop || g.ctx.Err() == nil: // a person's stop, or its channel was deleted
		for _, pt := range untaken {
			forget = append(forget, pt.msg.ID)
		}
	}
	outcome := "ok"
	switch {
	case stopped:
		outcome = "stopped"
	case err != nil:
		outcome = "error"
	}
	g.cfg.Metrics.Turns.WithLabelValues(outcome).Inc()
	latency := time.Since(start).Seconds()
	g.cfg.Metrics.TurnLatency.Observe(latency)

	if started && startErr == nil {
		id, text := t.snapshot()
		if model == "" {
			model = g.cfg.Agent.Name()
		}
		m := core.Message{
			ID: id, Lane: lk, Role: core.RoleAssistant, Text: text, Model: model, Tokens: tokens, Media: files,
			TS: start.UnixMilli(), Stopped: stopped || err != nil,
			Runtime: &core.Runtime{Model: bareModel(model), ContextPct: contextPct, Cwd: cwd, Latency: &latency, Cost: cost},
		}
		if g.showReasoning(settings) {
			m.Reasoning = reasoning.String()
		}
		ferr := g.commit(fin, func(tx *store.Tx) error {
			// The stream ends here, before message.stop is published: a
			// device joining from now on must not be shown it as running.
			t.mu.Lock()
			t.streamID, t.text = "", ""
			t.mu.Unlock()
			return tx.FinishMessage(m)
		}, &core.Event{Type: core.EvMessageStop, Lane: lk, Message: &m})
		if ferr != nil && !errors.Is(ferr, store.ErrNotFound) { // not found: deleted while streaming
			g.log.Error("turn: saving the reply", "lane", lk.String(), "err", ferr)
		}
		if ferr == nil {
			g.autoTitle(lk, pt.msg, m) // off the turn's path: it returns at once
		}
	}
	if err != nil && !stopped {
		g.log.Warn("turn failed", "lane", lk.String(), "err", err)
		g.systemMessage(fin, lk, "The agent failed: "+err.Error())
	}
	g.publish(&core.Event{Type: core.EvTyping, Lane: lk, On: false})
	g.endTurn(t, lk, pt.msg.ID, forget...)
	return next
}

// endTurn ends a turn with its lane's agent.idle, which answers the first
// agent.stop that asked for it (the others are answered apart), and
// forgets the turn's row in the same commit, with the rows of the
// steering it settled (also).
func (g *Gateway) endTurn(t *turn, lk core.Lane, turnID string, also ...string) {
	t.mu.Lock()
	t.ended = true
	reqs := t.stopReqs
	t.mu.Unlock()
	idle := &core.Event{Type: core.EvAgentIdle, Lane: lk}
	if len(reqs) > 0 {
		idle.ReplyTo = &reqs[0]
	}
	if err := g.commit(context.Background(), func(tx *store.Tx) error {
		for _, id := range append([]string{turnID}, also...) {
			if err := tx.EndTurn(id); err != nil {
				return err
			}
		}
		return nil
	}, idle); err != nil {
		g.log.Error("turn: agent.idle", "lane", lk.String(), "err", err)
	}
	for _, r := range reqs[min(1, len(reqs)):] {
		g.replyIdle(r, lk)
	}
}

// systemMessage posts a message from the gateway itself into a lane. It is
// outboxed (devices that were away learn of it) but kept out of history,
// which holds the conversation.
func (g *Gateway) systemMessage(ctx context.Context, lk core.Lane, text string) {
	m := core.Message{ID: core.NewID("m_"), Lane: lk, Role: core.RoleSystem, Text: text, TS: time.Now().UnixMilli()}
	if err := g.commit(ctx, nil, &core.Event{Type: core.EvMessage, Lane: lk, Message: &m}); err != nil {
		g.log.Error("system message", "lane", lk.String(), "err", err)
	}
}

// bareModel drops a vendor prefix: "openai/gpt-5" → "gpt-5".
func bareModel(m string) string {
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		return m[i+1:]
	}
	return m
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
