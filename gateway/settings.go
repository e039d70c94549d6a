package gateway

import (
	"context"
	"encoding/json"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// laneSettings are a lane's persistent choices.
type laneSettings struct {
	Provider      string `json:"provider,omitempty"`
	Model         string `json:"model,omitempty"`
	Reasoning     string `json:"reasoning,omitempty"`
	ShowReasoning *bool  `json:"show_reasoning,omitempty"`
	Fast          bool   `json:"fast,omitempty"`
	// Approvals is the lane's approval mode (agent.AskAll, AskOutside);
	// "" the tools' default. /yolo is not kept: it ends with the session.
	Approvals string `json:"approvals,omitempty"`
}

// session is what a lane's session remembers until /new or a restart:
// approvals given "for this session" and /yolo.
type session struct {
	approved map[string]bool
	yolo     bool
}

func (g *Gateway) settings(ctx context.Context, lk core.Lane) laneSettings {
	var s laneSettings
	if b, err := g.st.LaneSettings(ctx, lk); err == nil && b != nil {
		json.Unmarshal(b, &s)
	}
	return s
}

func (g *Gateway) saveSettings(ctx context.Context, lk core.Lane, s laneSettings) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return g.commit(ctx, func(tx *store.Tx) error { return tx.SetLaneSettings(lk, b) }, nil)
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

// loadConversation reads a lane's conversation for the agent.
func (g *Gateway) loadConversation(ctx context.Context, lk core.Lane) ([]agent.Msg, error) {
	bodies, err := g.st.Conversation(ctx, lk)
	if err != nil {
		return nil, err
	}
	out := make([]agent.Msg, 0, len(bodies))
	for _, b := range bodies {
		var m agent.Msg
		if err := json.Unmarshal(b, &m); err != nil {
			g.log.Warn("skipping an unreadable conversation entry", "lane", lk.String(), "err", err)
			continue
		}
		out = append(out, m)
	}
	return out, nil
}
