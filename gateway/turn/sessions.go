package turn

import (
	"context"
	"sync"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// session is what a lane's session remembers until /new or a restart:
// approvals given "for this session" and /yolo. Lane settings, which
// last, are the store's (record.LaneSettings).
type session struct {
	approved map[string]bool
	yolo     bool
}

// sessions are the lanes' sessions.
type sessions struct {
	mu sync.Mutex
	m  map[core.Lane]*session
}

// getLocked returns lk's session, made when it has none; s.mu is held.
func (s *sessions) getLocked(lk core.Lane) *session {
	ss := s.m[lk]
	if ss == nil {
		ss = &session{approved: map[string]bool{}}
		s.m[lk] = ss
	}
	return ss
}

func (s *sessions) yolo(lk core.Lane) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[lk] != nil && s.m[lk].yolo
}

func (s *sessions) approved(lk core.Lane, command string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[lk]
	return ss != nil && ss.approved[command]
}

func (s *sessions) approve(lk core.Lane, command string) {
	s.mu.Lock()
	s.getLocked(lk).approved[command] = true
	s.mu.Unlock()
}

// ToggleYolo flips lk's /yolo and returns it.
func (r *Runner) ToggleYolo(lk core.Lane) bool {
	r.sessions.mu.Lock()
	defer r.sessions.mu.Unlock()
	ss := r.sessions.getLocked(lk)
	ss.yolo = !ss.yolo
	return ss.yolo
}

// SetYolo sets lk's /yolo.
func (r *Runner) SetYolo(lk core.Lane, on bool) {
	r.sessions.mu.Lock()
	r.sessions.getLocked(lk).yolo = on
	r.sessions.mu.Unlock()
}

// ResetSession forgets lk's session and todo list (/new; the caller
// clears the conversation). Devices showing the todo list are told.
func (r *Runner) ResetSession(lk core.Lane) {
	r.sessions.mu.Lock()
	delete(r.sessions.m, lk)
	r.sessions.mu.Unlock()
	r.mu.Lock()
	hadTodos := false
	if l := r.lanes[lk]; l != nil {
		hadTodos = len(l.todos) > 0
		l.todos = nil
	}
	r.mu.Unlock()
	if hadTodos {
		r.c.Publish(&core.Event{Type: core.EvTodo, Lane: lk, Todos: []core.Todo{}})
	}
}

// Settings returns a lane's settings for a command: the defaults, logged,
// when they cannot be read (a turn refuses to run instead, see laneState;
// saving new ones replaces the unreadable row).
func (r *Runner) Settings(ctx context.Context, lk core.Lane) record.LaneSettings {
	s, err := r.st.LaneSettings(ctx, lk)
	if err != nil {
		r.log.Error("lane settings unreadable, using the defaults", "lane", lk.String(), "err", err)
	}
	return s
}

// ShowReasoning says whether replies of a lane with settings s show their
// reasoning.
func (r *Runner) ShowReasoning(s record.LaneSettings) bool {
	if s.ShowReasoning != nil {
		return *s.ShowReasoning
	}
	return r.cfg.ShowReasoning
}

// AgentSettings is what a turn of lk hands the agent.
func (r *Runner) AgentSettings(lk core.Lane, s record.LaneSettings) agent.Settings {
	as := agent.Settings{Provider: s.Provider, Model: s.Model, Reasoning: s.Reasoning, Fast: s.Fast}
	if s.Fast {
		as.Reasoning = "minimal"
		if r.cfg.FastModel != "" {
			as.Model = r.cfg.FastModel
		}
	}
	as.Yolo = r.sessions.yolo(lk)
	return as
}
