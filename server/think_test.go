package server_test

import (
	"strings"
	"testing"

	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
)

// TestModelThinkingOpenedByTheTemplate: a model whose chat template opened
// the think block (DeepSeek-R1, QwQ behind llama.cpp --reasoning-format
// none) streams its thinking, "</think>", then the answer. The devices see
// the thinking as reply text until the tag arrives; then the bubble starts
// over, and the reply kept (message.stop, history, the conversation sent
// to the model next) is the answer alone, the thinking its reasoning.
func TestModelThinkingOpenedByTheTemplate(t *testing.T) {
	const thinking, answer = "The person greets me. I should answer briefly.", "Hello! How can I help?"
	r := agStart(t)
	r.script(fakeopenai.Script{Chunks: fakeopenai.ThinkOpenedByTemplate(thinking, answer, 7)})
	a := r.dial("phone")
	got := agTurn(t, a, def, "hi")
	ups := agOnly(got, "message.update")
	if last := testgw.Str(t, ups[len(ups)-1], "text"); last != answer {
		t.Fatalf("the bubble ends with %q", last)
	}
	s := agStop(t, got)
	if s.FinalText != answer || strings.TrimSpace(s.Reasoning) != thinking {
		t.Fatalf("stop: text %q reasoning %q", s.FinalText, s.Reasoning)
	}
	h, err := history(t, a, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := h.Messages[len(h.Messages)-1]; m.Text != answer {
		t.Fatalf("history keeps %q", m.Text)
	}
	r.reply("Fine.")
	agTurn(t, a, def, "and now?")
	msgs := agMsgs(t, r.requests(2)[1])
	if m := msgs[len(msgs)-2]; m["role"] != "assistant" || m["content"] != answer {
		t.Fatalf("the model is sent back %v", m)
	}
}
