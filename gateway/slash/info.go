package slash

import (
	"context"
	"fmt"
	"strings"
)

func cmdStatus(ctx context.Context, env Env, c Call) error {
	lk := c.Lane
	s := env.Settings(ctx, lk)
	as := env.AgentSettings(lk, s)
	var b strings.Builder
	if ml, ok := env.Agent().(modelLister); ok {
		p, m := ml.Resolve(as)
		fmt.Fprintf(&b, "Model: %s (provider %s)\n", m.ID, p.ID)
	} else {
		fmt.Fprintf(&b, "Backend: %s. No model is configured, so replies are echoes: set OPENAI_BASE_URL, OPENAI_API_KEY and IRISGATE_MODEL to talk to a model.\n", env.Agent().Name())
	}
	reasoning := as.Reasoning
	if reasoning == "" {
		reasoning = "model default"
	}
	fmt.Fprintf(&b, "Reasoning: %s, shown: %v, fast: %v\n", reasoning, env.ShowReasoning(s), s.Fast)
	conv, _ := env.ConversationLen(ctx, lk) // counted, not read: /status works on a damaged one
	fmt.Fprintf(&b, "Conversation: %d entries\n", conv)
	running, queued := env.LaneStatus(lk)
	fmt.Fprintf(&b, "Turn running: %v, queued: %d\n", running, queued)
	fmt.Fprintf(&b, "Approvals: %s — %s\n", map[bool]string{true: "off", false: "on"}[as.Yolo], strings.ToLower(approvalsLabel(s, as.Yolo)))
	fmt.Fprintf(&b, "Working directory: %s", env.Workdir())
	env.SystemMessage(ctx, lk, b.String())
	return nil
}
