package slash

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// modelLister is an agent that offers a choice of models.
type modelLister interface {
	Providers() []agent.Provider
	Resolve(agent.Settings) (agent.Provider, agent.ModelInfo)
}

func cmdModel(ctx context.Context, env Env, c Call) error {
	lk := c.Lane
	ml, ok := env.Agent().(modelLister)
	if !ok {
		return ErrNoModel.New()
	}
	set := func(ctx context.Context, to hub.Caller, v string) error {
		s := env.Settings(ctx, lk)
		prov, model, found := strings.Cut(v, "/")
		switch {
		case !found && providerExists(ml, v):
			// A provider alone: its first model.
			p, m := ml.Resolve(agent.Settings{Provider: v})
			prov, model = p.ID, m.ID
		case !found || !providerExists(ml, prov):
			// A model alone, or a vendor-prefixed id like openai/gpt-5: on
			// the provider that lists it, else on the current one.
			cur, _ := ml.Resolve(env.AgentSettings(lk, s))
			prov, model = cur.ID, v
			if p := listing(ml, v); p != "" {
				prov = p
			}
		}
		s.Provider, s.Model = prov, model
		if err := env.SaveSettings(ctx, lk, s); err != nil {
			return err
		}
		env.Reply(ctx, lk, to, fmt.Sprintf("Model: %s (provider %s).", model, prov))
		return nil
	}
	if c.Args != "" {
		return set(ctx, c.From, c.Args)
	}
	cur, curModel := ml.Resolve(env.AgentSettings(lk, env.Settings(ctx, lk)))
	p := core.Picker{Kind: "model", Title: "Model", CurrentModel: curModel.ID, CurrentProvider: cur.ID}
	for _, pr := range ml.Providers() {
		cp := core.Provider{ID: pr.ID, Label: orDefault(pr.Label, pr.ID)}
		for _, m := range pr.Models {
			cp.Models = append(cp.Models, core.Choice{Value: m.ID, Label: orDefault(m.Label, m.ID)})
		}
		p.Providers = append(p.Providers, cp)
	}
	return env.OpenPicker(ctx, lk, p, set)
}

// listing returns the first provider that lists model, or "" when none
// does.
func listing(ml modelLister, model string) string {
	for _, p := range ml.Providers() {
		for _, m := range p.Models {
			if m.ID == model {
				return p.ID
			}
		}
	}
	return ""
}

func providerExists(ml modelLister, id string) bool {
	for _, p := range ml.Providers() {
		if p.ID == id {
			return true
		}
	}
	return false
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

var reasoningLevels = []string{"none", "minimal", "low", "medium", "high"}

func cmdReasoning(ctx context.Context, env Env, c Call) error {
	lk := c.Lane
	set := func(ctx context.Context, to hub.Caller, v string) error {
		s := env.Settings(ctx, lk)
		switch v {
		case "show", "hide":
			on := v == "show"
			s.ShowReasoning = &on
		default:
			if !slices.Contains(reasoningLevels, v) {
				return ErrReasoningLevel.New(v, strings.Join(reasoningLevels, ", "))
			}
			s.Reasoning = v
		}
		if err := env.SaveSettings(ctx, lk, s); err != nil {
			return err
		}
		env.Reply(ctx, lk, to, fmt.Sprintf("Reasoning effort: %s, shown: %v.", orDefault(s.Reasoning, "model default"), env.ShowReasoning(s)))
		return nil
	}
	if c.Args != "" {
		return set(ctx, c.From, strings.ToLower(c.Args))
	}
	s := env.Settings(ctx, lk)
	p := core.Picker{Kind: "choice", Title: "Reasoning effort"}
	for _, l := range reasoningLevels {
		p.Choices = append(p.Choices, core.Choice{Value: l, Label: strings.ToUpper(l[:1]) + l[1:], IsCurrent: s.Reasoning == l})
	}
	show := env.ShowReasoning(s)
	p.Choices = append(p.Choices, core.Choice{Value: "show", Label: "Show reasoning", IsCurrent: show}, core.Choice{Value: "hide", Label: "Hide reasoning", IsCurrent: !show})
	return env.OpenPicker(ctx, lk, p, set)
}

func cmdFast(ctx context.Context, env Env, c Call) error {
	lk := c.Lane
	set := func(ctx context.Context, to hub.Caller, v string) error {
		s := env.Settings(ctx, lk)
		switch v {
		case "on":
			s.Fast = true
		case "off":
			s.Fast = false
		default:
			return ErrFastUsage.New()
		}
		if err := env.SaveSettings(ctx, lk, s); err != nil {
			return err
		}
		env.Reply(ctx, lk, to, "Fast mode "+v+".")
		return nil
	}
	if c.Args != "" {
		return set(ctx, c.From, strings.ToLower(c.Args))
	}
	s := env.Settings(ctx, lk)
	return env.OpenPicker(ctx, lk, core.Picker{Kind: "choice", Title: "Fast mode", Choices: []core.Choice{
		{Value: "on", Label: "On", IsCurrent: s.Fast}, {Value: "off", Label: "Off", IsCurrent: !s.Fast},
	}}, set)
}

// cmdVoice turns the lane's spoken replies on or off; alone it says the
// state, and whether this gateway can speak at all.
func cmdVoice(ctx context.Context, env Env, c Call) error {
	s := env.Settings(ctx, c.Lane)
	var note string
	if !env.Speaks() {
		note = " This gateway has no text-to-speech endpoint (irisgate serve --tts-url): replies stay text until one is set."
	}
	switch strings.ToLower(strings.TrimSpace(c.Args)) {
	case "":
		state := "off"
		if s.Voice {
			state = "on"
		}
		env.Reply(ctx, c.Lane, c.From, "Voice replies are "+state+" in this chat (/voice on|off)."+note)
		return nil
	case "on":
		s.Voice = true
	case "off":
		s.Voice, note = false, ""
	default:
		return ErrVoiceUsage.New()
	}
	if err := env.SaveSettings(ctx, c.Lane, s); err != nil {
		return err
	}
	if s.Voice {
		env.Reply(ctx, c.Lane, c.From, "Voice replies on: each reply comes with its audio."+note)
	} else {
		env.Reply(ctx, c.Lane, c.From, "Voice replies off.")
	}
	return nil
}
