package turn

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/commit"
	"github.com/irisgate/irisgate/store"
)

// recorder turns what a running turn's agent reports into events, one
// method per kind. What a device must not miss (the reply's start and
// end, commentary, a tool's end, a file's offer, the conversation) is
// committed before it is published; the stream itself (updates, tool
// starts and progress, todos) is ephemeral. Its methods run on the
// agent's goroutine, in the order the agent reports.
type recorder struct {
	r     *Runner
	l     *lane
	t     *turn
	lk    core.Lane
	start time.Time
	// fin is the context of the turn's writes: a stopped turn must still
	// record its partial reply.
	fin context.Context
	// replyID is the reply's id, known before it starts streaming so the
	// turn's conversation entries can be tied to it: deleting the reply
	// deletes what the model said and did for it.
	replyID string

	started bool // the reply's bubble exists (message.start)
	// saved is the commit of the reply's streaming row, queued at its
	// start and not waited for (begin says why); savedErr its outcome
	// once waited for.
	saved      *commit.Pending
	savedErr   error
	savedKnown bool
	lastSave   time.Time
	reasoning  strings.Builder
	model, cwd string
	tokens     int
	contextPct *int
	cost       *float64
	files      []core.Media // sent by the agent, listed in the reply
	// speech speaks the reply as it streams (speech.go); nil unless the
	// lane has /voice on.
	speech *speech
}

func (r *Runner) newRecorder(l *lane, t *turn) *recorder {
	now := time.Now()
	return &recorder{r: r, l: l, t: t, lk: l.key, start: now, lastSave: now, fin: context.Background(), replyID: core.NewMessageID()}
}

// Emit is the agent's emit: each event kind to its method.
func (rec *recorder) Emit(e agent.Event) {
	switch e.Kind {
	case agent.Text:
		rec.text(e.Text)
	case agent.Reasoning:
		rec.reasoning.WriteString(e.Text)
	case agent.Commentary:
		rec.commentary(e.Text)
	case agent.TextIsCommentary:
		rec.textIsCommentary(e.Text)
	case agent.TextIsReasoning:
		rec.textIsReasoning(e.Text)
	case agent.File:
		rec.file(e.Path)
	case agent.ToolStart:
		rec.r.c.Publish(&core.Event{Type: core.EvToolStart, Lane: rec.lk, Tool: e.Tool})
	case agent.ToolProgress:
		rec.r.c.Publish(&core.Event{Type: core.EvToolProgress, Lane: rec.lk, Tool: e.Tool})
	case agent.ToolEnd:
		rec.r.c.Commit(rec.fin, nil, &core.Event{Type: core.EvToolEnd, Lane: rec.lk, Tool: e.Tool})
	case agent.Todos:
		rec.r.setTodos(rec.l, e.Todos)
		rec.r.c.Publish(&core.Event{Type: core.EvTodo, Lane: rec.lk, Todos: e.Todos})
	case agent.Usage:
		rec.usage(e)
	}
}

// begin starts the reply's bubble: at its first text, or at a file the
// agent sends before any text, which the reply then carries.
func (rec *recorder) begin() {
	if rec.started {
		return
	}
	rec.started = true
	id := rec.replyID
	m := core.Message{ID: id, Lane: rec.lk, Role: core.RoleAssistant, TS: time.Now().UnixMilli()}
	rec.t.mu.Lock()
	rec.t.streamID = id
	rec.t.mu.Unlock()
	// message.start is never outboxed (spec/DECISIONS.md), so it goes out
	// now and the row the stream is saved into is queued behind it, not
	// waited for: the first token reaches the devices without a commit in
	// its way (issue 17). What needs the row (the progress saves, a file's
	// offer, the final save) is queued after it on the same commit log,
	// which applies one goroutine's writes in order. A crash before the
	// row lands leaves a stream no row records: the turn's row names it
	// (StartTurn), and recovery tells the devices to drop it
	// (SettleCutOff). A row that could not be stored is made at the end.
	// The row is queued before the id is shown to anyone, so whatever a
	// device asks of it (a delete) is applied after it.
	p, err := rec.r.c.Enqueue(rec.fin, func(tx store.Tx) error { return tx.InsertMessage(m, true) }, nil)
	if err != nil {
		p = nil // the log has stopped: finish fails as it will
	}
	rec.saved = p
	rec.r.c.Publish(&core.Event{Type: core.EvMessageStart, Lane: rec.lk, StreamID: id, Role: core.RoleAssistant})
}

// startErr waits for the reply's streaming row and says whether it was
// stored; it waits once.
func (rec *recorder) startErr() error {
	if rec.saved == nil {
		return commit.ErrStopped
	}
	if !rec.savedKnown {
		rec.savedErr, rec.savedKnown = rec.saved.Wait(), true
	}
	return rec.savedErr
}

// text streams a piece of the reply: an update with the whole text so
// far, and a save of it every ProgressEvery, bounding what a crash loses.
func (rec *recorder) text(piece string) {
	rec.begin()
	t := rec.t
	t.mu.Lock()
	t.text += piece
	id, text := t.streamID, t.text
	t.mu.Unlock()
	rec.r.c.Publish(&core.Event{Type: core.EvMessageUpdate, Lane: rec.lk, StreamID: id, Text: text})
	rec.speech.add(piece)
	if time.Since(rec.lastSave) >= rec.r.cfg.ProgressEvery {
		rec.lastSave = time.Now()
		reasoning := rec.reasoning.String()
		rec.r.c.CommitLater(func(tx store.Tx) error { return tx.SaveProgress(id, text, reasoning) })
	}
}

func (rec *recorder) commentary(text string) {
	rec.r.c.Commit(rec.fin, nil, &core.Event{Type: core.EvCommentary, Lane: rec.lk, StreamID: core.NewMessageID(), Text: text})
}

// textIsCommentary: what streamed so far was the model thinking aloud
// before its tools. It becomes a commentary beat and the bubble starts
// over.
func (rec *recorder) textIsCommentary(fallback string) {
	t := rec.t
	t.mu.Lock()
	text, id := t.text, t.streamID
	t.text = ""
	t.mu.Unlock()
	rec.speech.reset()
	if text == "" {
		text = fallback
	}
	if rec.started {
		rec.r.c.Publish(&core.Event{Type: core.EvMessageUpdate, Lane: rec.lk, StreamID: id, Text: ""})
	}
	if strings.TrimSpace(text) != "" {
		rec.commentary(text)
	}
}

// textIsReasoning: what streamed so far was the model's reasoning (its
// chat template opened the think block). It moves there, and the bubble
// starts over.
func (rec *recorder) textIsReasoning(fallback string) {
	t := rec.t
	t.mu.Lock()
	text, id := t.text, t.streamID
	t.text = ""
	t.mu.Unlock()
	rec.speech.reset()
	if text == "" {
		text = fallback
	}
	rec.reasoning.WriteString(text)
	if rec.started {
		rec.r.c.Publish(&core.Event{Type: core.EvMessageUpdate, Lane: rec.lk, StreamID: id, Text: ""})
		// What was saved as the reply so far is not one.
		reasoning := rec.reasoning.String()
		rec.r.c.CommitLater(func(tx store.Tx) error { return tx.SaveProgress(id, "", reasoning) })
	}
}

// file stores a file the agent sends and offers it at once (a media.offer
// tied to the reply); the reply lists it when it finishes. A file that
// cannot be offered is said in the lane.
func (rec *recorder) file(path string) {
	rec.begin()
	startErr := rec.startErr()
	md, err := rec.r.host.OfferFile(rec.fin, rec.lk, rec.replyID, path)
	if startErr == nil && err == nil {
		rec.files = append(rec.files, md)
		return
	}
	if err == nil {
		err = startErr
	}
	rec.r.log.Warn("turn: offering a file", "lane", rec.lk.String(), "path", path, "err", err)
	why := err.Error()
	var ce *core.Error
	if errors.As(err, &ce) {
		why = ce.Message
	}
	rec.r.SystemMessage(rec.fin, rec.lk, "📎 The agent's file "+HomeRelative(path)+" could not be offered: "+why)
}

func (rec *recorder) usage(e agent.Event) {
	if e.Model != "" {
		rec.model = e.Model
	}
	rec.tokens += e.Tokens
	if e.ContextPct != nil {
		rec.contextPct = e.ContextPct
	}
	if e.Cost != nil {
		rec.cost = e.Cost
	}
	if e.Cwd != "" {
		rec.cwd = HomeRelative(e.Cwd)
	}
}

// Record is the agent's Record: a conversation entry, tied to the reply
// unless it stands for a message of its own.
func (rec *recorder) Record(m agent.Msg) {
	tag := m.MessageID
	if tag == "" {
		tag = rec.replyID
	}
	// A steer the agent records is consumed by this turn: it stops being
	// owed in the same commit that puts it in the conversation, so a
	// crash either side of it neither loses it nor answers it twice.
	consumed := rec.t.steeredBy(m.MessageID)
	err := rec.r.c.Commit(rec.fin, func(tx store.Tx) error {
		if err := tx.AppendConversation(rec.lk, tag, entryOf(m)); err != nil {
			return err
		}
		if consumed {
			return tx.EndTurn(m.MessageID)
		}
		return nil
	}, nil)
	if err != nil {
		rec.r.log.Error("turn: recording the conversation", "lane", rec.lk.String(), "err", err)
	}
}

// finish saves the reply, when one started, with its message.stop, and
// returns it; ok is false when there was none or it could not be saved.
// stopped marks a reply the turn did not finish (stopped, or failed).
// With /voice on, the rest of a finished reply is spoken first (a stopped
// one's speech is cancelled), and the audio is listed with the files.
func (rec *recorder) finish(stopped bool, latency float64, showReasoning bool) (reply core.Message, ok bool) {
	spoken, unspoken := rec.speech.end(stopped)
	if !rec.started {
		return reply, false
	}
	// A streaming row that could not be stored (the database was away a
	// moment) is made now, whole: the reply the devices watched is kept.
	whole := rec.startErr() != nil
	rec.files = append(rec.files, spoken...)
	t := rec.t
	id, text := t.snapshot()
	model := rec.model
	if model == "" {
		model = rec.r.cfg.Agent.Name()
	}
	m := core.Message{
		ID: id, Lane: rec.lk, Role: core.RoleAssistant, Text: text, Model: model, Tokens: rec.tokens, Media: rec.files,
		TS: rec.start.UnixMilli(), Stopped: stopped,
		Runtime: &core.Runtime{Model: bareModel(model), ContextPct: rec.contextPct, Cwd: rec.cwd, Latency: &latency, Cost: rec.cost},
	}
	if showReasoning {
		m.Reasoning = rec.reasoning.String()
	}
	err := rec.r.c.Commit(rec.fin, func(tx store.Tx) error {
		// The stream ends here, before message.stop is published: a
		// device joining from now on must not be shown it as running.
		t.mu.Lock()
		t.streamID, t.text = "", ""
		t.mu.Unlock()
		if whole {
			return tx.InsertMessage(m, false)
		}
		return tx.FinishMessage(m)
	}, &core.Event{Type: core.EvMessageStop, Lane: rec.lk, Message: &m})
	if err != nil && !errors.Is(err, store.ErrNotFound) { // not found: deleted while streaming
		rec.r.log.Error("turn: saving the reply", "lane", rec.lk.String(), "err", err)
	}
	if unspoken != nil {
		rec.r.log.Warn("turn: speaking the reply", "lane", rec.lk.String(), "err", unspoken)
		rec.r.SystemMessage(rec.fin, rec.lk, "🔇 The reply could not be spoken: "+unspoken.Error())
	}
	return m, err == nil
}
