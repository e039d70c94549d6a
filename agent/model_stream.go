package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
)

type streamResult struct {
	text             string
	calls            []ToolCall
	promptTokens     int
	completionTokens int
	started          bool // a chunk arrived: the server answered
}

// stream makes one streaming call, reporting text and reasoning as they
// come and assembling tool calls from their split deltas. Its error is the
// client's own (describeAPIError words it).
func (m *Model) stream(ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams, emit func(Event)) (streamResult, error) {
	var res streamResult
	var text strings.Builder
	var calls callAssembler
	var think thinkSplitter
	out := func(p thinkPart) {
		if p.retract && text.Len() > 0 {
			// Shown as the reply so far, it was the model thinking.
			emit(Event{Kind: TextIsReasoning, Text: text.String()})
			text.Reset()
		}
		if p.reasoning != "" {
			emit(Event{Kind: Reasoning, Text: p.reasoning})
		}
		if p.text != "" {
			text.WriteString(p.text)
			emit(Event{Kind: Text, Text: p.text})
		}
	}
	st := client.Chat.Completions.NewStreaming(ctx, params)
	defer st.Close()
	for st.Next() {
		res.started = true
		chunk := st.Current()
		if chunk.Usage.PromptTokens > 0 || chunk.Usage.CompletionTokens > 0 {
			res.promptTokens = int(chunk.Usage.PromptTokens)
			res.completionTokens = int(chunk.Usage.CompletionTokens)
		}
		for _, ch := range chunk.Choices {
			d := ch.Delta
			if r := reasoningDelta(d); r != "" {
				emit(Event{Kind: Reasoning, Text: r})
			}
			if d.Content != "" {
				out(think.feed(d.Content))
			}
			for _, tc := range d.ToolCalls {
				calls.add(tc)
			}
		}
	}
	out(think.flush())
	res.text = text.String()
	if err := st.Err(); err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, err
	}
	for n, c := range calls.calls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d", n)
		}
		res.calls = append(res.calls, *c)
	}
	return res, nil
}

// callAssembler puts tool calls together from their deltas, as OpenAI
// streams them (the name in the first delta of each index, the arguments
// in pieces) and as other servers do:
//   - the whole name again in every delta (MiniMax-M2 through NVIDIA NIM,
//     NousResearch/hermes-agent#11984; vLLM builds that repeat it for the
//     Vercel AI SDK, 1CatAI/1Cat-vLLM#240): taken once, not appended;
//   - no index at all (Ollama before 0.4.7, ollama/ollama#7881), or index
//     0 for every call (Ollama since, ollama/ollama#15457; LiteLLM's
//     ollama_chat, BerriAI/litellm#33678), each call whole in one delta
//     with its own id: a new id starts a new call instead of being merged
//     into the one before.
type callAssembler struct {
	calls   []*ToolCall
	byIndex map[int64]*ToolCall
	last    *ToolCall
}

func (a *callAssembler) add(tc openai.ChatCompletionChunkChoiceDeltaToolCall) {
	var c *ToolCall
	indexed := tc.JSON.Index.Valid()
	switch {
	case indexed:
		c = a.byIndex[tc.Index]
		if c != nil && tc.ID != "" && c.ID != "" && tc.ID != c.ID {
			c = nil // another call under the same index
		}
	case tc.ID != "":
		for _, x := range a.calls {
			if x.ID == tc.ID {
				c = x
			}
		}
	default:
		c = a.last // a continuation of the call before
	}
	if c == nil {
		c = &ToolCall{}
		a.calls = append(a.calls, c)
	}
	if indexed {
		if a.byIndex == nil {
			a.byIndex = map[int64]*ToolCall{}
		}
		a.byIndex[tc.Index] = c
	}
	a.last = c
	if tc.ID != "" {
		c.ID = tc.ID
	}
	if n := tc.Function.Name; n != "" && n != c.Name {
		c.Name += n // pieces of a name join; the same name again is not a piece
	}
	c.Arguments += tc.Function.Arguments
}

// thinkSplitter takes reasoning out of a reply's content: servers that run
// a reasoning model without a reasoning parser stream its thinking inline
// as <think>…</think> (llama.cpp llama-server with --reasoning-format none,
// and in streaming even with deepseek before ggml-org/llama.cpp#16394; vLLM
// without --reasoning-parser; LM Studio, lmstudio-bug-tracker#1569). A tag
// may be cut across deltas: a tail that could start one is held back until
// the next delta tells.
//
// A chat template may open the block in the prompt itself (DeepSeek-R1's
// since deepseek-ai/DeepSeek-R1@7ca5e1e, QwQ, the R1 distills: their
// generation prompt ends in "<think>\n"): the content then starts inside
// the block and only "</think>" comes (deepseek-ai/DeepSeek-R1#352, #526).
// What streamed before that first closing tag, with no block opened and
// no reply after one, was the reasoning: feed says so (retract), and the
// caller takes back the text it was given as the reply. A closing tag
// after that is dropped.
type thinkSplitter struct {
	in     bool   // inside a think block
	held   string // a tail that may be the start of a tag
	after  bool   // just past a think block: the reply's leading blank lines go
	opened bool   // just inside one: so do the reasoning's
	seen   bool   // a tag was seen: the text so far is the reply for good
}

const thinkOpen, thinkClose = "<think>", "</think>"

// thinkPart is what one delta of content holds: retract says the reply
// text returned before was reasoning (a block opened by the template),
// and is to be taken back before reasoning and text are placed.
type thinkPart struct {
	retract         bool
	text, reasoning string
}

// feed takes the next content delta.
func (s *thinkSplitter) feed(delta string) thinkPart {
	buf := s.held + delta
	s.held = ""
	var p thinkPart
	var t, r strings.Builder
	for buf != "" {
		if s.in {
			if s.opened {
				buf = strings.TrimLeft(buf, " \t\r\n")
				if buf == "" {
					break
				}
				s.opened = false
			}
			if i := strings.Index(buf, thinkClose); i >= 0 {
				r.WriteString(buf[:i])
				buf = buf[i+len(thinkClose):]
				s.in, s.after = false, true
				continue
			}
			k := partialTag(buf, thinkClose)
			r.WriteString(buf[:len(buf)-k])
			s.held = buf[len(buf)-k:]
			break
		}
		open, stray := strings.Index(buf, thinkOpen), strings.Index(buf, thinkClose)
		if open >= 0 && (stray < 0 || open < stray) {
			s.text(&t, buf[:open])
			buf = buf[open+len(thinkOpen):]
			s.in, s.opened, s.seen = true, true, true
			continue
		}
		if stray >= 0 {
			if !s.seen {
				// The template opened the block: all of it so far was
				// reasoning, this delta's text too.
				p.retract = true
				r.WriteString(t.String())
				r.WriteString(buf[:stray])
				t.Reset()
				s.after = true
			} else {
				s.text(&t, buf[:stray]) // a stray tag inside the reply: dropped
			}
			buf = buf[stray+len(thinkClose):]
			s.seen = true
			continue
		}
		k := max(partialTag(buf, thinkOpen), partialTag(buf, thinkClose))
		s.text(&t, buf[:len(buf)-k])
		s.held = buf[len(buf)-k:]
		break
	}
	p.text, p.reasoning = t.String(), r.String()
	return p
}

func (s *thinkSplitter) text(t *strings.Builder, x string) {
	if s.after {
		x = strings.TrimLeft(x, " \t\r\n")
		if x == "" {
			return
		}
		s.after = false
	}
	t.WriteString(x)
}

// flush returns what was held back at the end of the reply.
func (s *thinkSplitter) flush() thinkPart {
	h := s.held
	s.held = ""
	if s.in {
		return thinkPart{reasoning: h}
	}
	var t strings.Builder
	s.text(&t, h)
	return thinkPart{text: t.String()}
}

// SplitThink splits a reply that arrives whole into its answer and the
// reasoning inline in it, as a stream of it is split (for a title model's
// answer, say).
func SplitThink(content string) (reply, reasoning string) {
	var s thinkSplitter
	p, end := s.feed(content), s.flush()
	if end.retract {
		p.reasoning, p.text = p.reasoning+p.text, ""
	}
	return p.text + end.text, p.reasoning + end.reasoning
}

// partialTag is the length of the longest tail of s that begins tag.
func partialTag(s, tag string) int {
	for k := min(len(s), len(tag)-1); k > 0; k-- {
		if strings.HasPrefix(tag, s[len(s)-k:]) {
			return k
		}
	}
	return 0
}

// reasoningDelta reads the non-standard reasoning fields servers send:
// reasoning_content (DeepSeek, vLLM, llama.cpp) or reasoning (OpenRouter,
// Ollama).
func reasoningDelta(d openai.ChatCompletionChunkChoiceDelta) string {
	for _, k := range []string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}
