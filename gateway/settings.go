package gateway

import (
	"context"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// laneSettings are a lane's persistent choices, stored as they are (the
// store owns their format). /yolo is not kept: it ends with the session.
type laneSettings = record.LaneSettings

// session is what a lane's session remembers until /new or a restart:
// approvals given "for this session" and /yolo.
type session struct {
	approved map[string]bool
	yolo     bool
}

// settings returns a lane's settings for a command: the defaults, logged,
// when they cannot be read (a turn refuses to run instead, see runTurn;
// saving new ones replaces the unreadable row).
func (g *Gateway) settings(ctx context.Context, lk core.Lane) laneSettings {
	s, err := g.st.LaneSettings(ctx, lk)
	if err != nil {
		g.log.Error("lane settings unreadable, using the defaults", "lane", lk.String(), "err", err)
	}
	return s
}

func (g *Gateway) saveSettings(ctx context.Context, lk core.Lane, s laneSettings) error {
	return g.commit(ctx, func(tx store.Tx) error { return tx.SetLaneSettings(lk, s) }, nil)
}

func (g *Gateway) showReasoning(s laneSettings) bool {
	if s.ShowReasoning != nil {
		return *s.ShowReasoning
	}
	return g.cfg.ShowReasoning
}

// agentSettings is what a turn hands the agent.
func (g *Gateway) agentSettings(lk core.Lane, s laneSettings) agent.Settings {
	as := agent.Settings{Provider: s.Provider, Model: s.Model, Reasoning: s.Reasoning, Fast: s.Fast}
	if s.Fast {
		as.Reasoning = "minimal"
		if g.cfg.FastModel != "" {
			as.Model = g.cfg.FastModel
		}
	}
	g.mu.Lock()
	if ss := g.sessions[lk]; ss != nil {
		as.Yolo = ss.yolo
	}
	g.mu.Unlock()
	return as
}

func (g *Gateway) laneSession(lk core.Lane) *session {
	ss := g.sessions[lk]
	if ss == nil {
		ss = &session{approved: map[string]bool{}}
		g.sessions[lk] = ss
	}
	return ss
}

func (g *Gateway) laneApproved(lk core.Lane, command string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ss := g.sessions[lk]
	return ss != nil && ss.approved[command]
}

func (g *Gateway) approveForLane(lk core.Lane, command string) {
	g.mu.Lock()
	g.laneSession(lk).approved[command] = true
	g.mu.Unlock()
}

// loadConversation reads a lane's conversation for the agent. An entry
// that does not decode fails it: the model is never given a conversation
// with a hole in it.
func (g *Gateway) loadConversation(ctx context.Context, lk core.Lane) ([]agent.Msg, error) {
	entries, err := g.st.Conversation(ctx, lk)
	if err != nil {
		return nil, err
	}
	out := make([]agent.Msg, len(entries))
	for i, e := range entries {
		out[i] = msgOf(e)
	}
	return out, nil
}
