package agent

import (
	"context"
	"strings"
	"time"
	"unicode"
)

// Echo is the demo agent: it streams the person's words back, one word per
// Delay. It is labelled as such in every reply so nobody mistakes it for a
// model.
type Echo struct {
	Delay time.Duration
}

// EchoModel is the model name the echo agent reports.
const EchoModel = "echo (demo agent, no model configured)"

// Name implements Agent.
func (e *Echo) Name() string { return EchoModel }

// Run implements Agent.
func (e *Echo) Run(ctx context.Context, t Turn, emit func(Event)) error {
	text := t.Input
	if strings.TrimSpace(text) == "" {
		text = "(nothing to echo)"
	}
	var timer *time.Timer
	if e.Delay > 0 {
		timer = time.NewTimer(e.Delay)
		defer timer.Stop()
	}
	for _, w := range splitWords(text) {
		select {
		case s := <-t.Steer:
			// Recorded as the Steer contract asks, so the gateway knows the
			// steer was taken and a restart does not answer it again.
			if t.Record != nil {
				t.Record(Msg{Role: "user", Content: s.Text, MessageID: s.MessageID})
			}
			emit(Event{Kind: Commentary, Text: "steered: " + s.Text})
		default:
		}
		if timer != nil {
			timer.Reset(e.Delay)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		emit(Event{Kind: Text, Text: w})
	}
	emit(Event{Kind: Usage, Model: EchoModel, Tokens: len(strings.Fields(text))})
	return nil
}

// splitWords cuts s after each run of spaces, so the pieces concatenate
// back to s exactly.
func splitWords(s string) []string {
	var out []string
	start := 0
	inSpace := false
	for i, r := range s {
		sp := unicode.IsSpace(r)
		if inSpace && !sp {
			out = append(out, s[start:i])
			start = i
		}
		inSpace = sp
	}
	return append(out, s[start:])
}
