package fakeopenai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// What real OpenAI-compatible servers send where they differ from OpenAI.

// RepeatingName streams tool calls whose every delta carries the whole
// function name again: MiniMax-M2 through NVIDIA NIM does
// (NousResearch/hermes-agent#11984), and so do vLLM builds that repeat it
// for the Vercel AI SDK (1CatAI/1Cat-vLLM#240).
var RepeatingName = Style{RepeatName: true}

// ToolCallsOllama streams each tool call whole in one delta of its own
// with its own id, as Ollama's /v1/chat/completions does; indexed says
// whether the deltas carry "index" (always 0: ollama/ollama#15457, and
// LiteLLM's ollama_chat, BerriAI/litellm#33678) or none at all (Ollama
// before 0.4.7, ollama/ollama#7881).
func ToolCallsOllama(indexed bool, calls ...Call) []string {
	out := []string{chunk(map[string]any{"role": "assistant", "content": ""}, "")}
	for _, c := range calls {
		tc := map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args}}
		if indexed {
			tc["index"] = 0
		}
		out = append(out, chunk(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{tc}}, ""))
	}
	return append(out, chunk(map[string]any{"role": "assistant", "content": ""}, "tool_calls"), Usage(20, 10))
}

// ThinkInline streams a reasoning model's reply with its thinking inline
// in the content, <think>…</think> first, cut into n pieces without regard
// for the tags (so a tag is split across deltas): llama.cpp's llama-server
// with --reasoning-format none does so (and in streaming even with
// deepseek, before ggml-org/llama.cpp#16394), as does vLLM without
// --reasoning-parser and LM Studio (lmstudio-bug-tracker#1569).
func ThinkInline(thinking, answer string, n int) []string {
	content := "<think>\n" + thinking + "\n</think>\n\n" + answer
	out := []string{chunk(map[string]any{"role": "assistant", "content": ""}, "")}
	for _, p := range split(content, n) {
		out = append(out, chunk(map[string]any{"content": p}, ""))
	}
	return append(out, chunk(map[string]any{}, "stop"), Usage(11, len(content)/4+1))
}

// ThinkOpenedByTemplate streams a reasoning model's reply whose think
// block its chat template opened: the generation prompt of DeepSeek-R1
// (deepseek-ai/DeepSeek-R1@7ca5e1e), its distills and QwQ ends in
// "<think>\n", so the content starts inside the block and only the
// closing tag comes (deepseek-ai/DeepSeek-R1#352 and #526,
// open-webui/open-webui#9808), as llama.cpp with --reasoning-format none
// and vLLM without --reasoning-parser pass it on. It is cut into n pieces
// without regard for the tag.
func ThinkOpenedByTemplate(thinking, answer string, n int) []string {
	content := thinking + "\n</think>\n\n" + answer
	out := []string{chunk(map[string]any{"role": "assistant", "content": ""}, "")}
	for _, p := range split(content, n) {
		out = append(out, chunk(map[string]any{"content": p}, ""))
	}
	return append(out, chunk(map[string]any{}, "stop"), Usage(11, len(content)/4+1))
}

// refuseEffort answers a request whose reasoning_effort is not one of
// s.Efforts as vLLM does (its ChatCompletionRequest takes a Literal; v0.15
// took only low, medium, high: llm-jp/llm-jp-judge#56): 400 with pydantic's
// literal_error as the message and the numeric code.
func (s *Server) refuseEffort(w http.ResponseWriter, body map[string]any) bool {
	effort, ok := body["reasoning_effort"].(string)
	if !ok || len(s.Efforts) == 0 || slices.Contains(s.Efforts, effort) {
		return false
	}
	quoted := make([]string, len(s.Efforts))
	for i, e := range s.Efforts {
		quoted[i] = "'" + e + "'"
	}
	expected := strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	msg := fmt.Sprintf("[{'type': 'literal_error', 'loc': ('body', 'reasoning_effort'), 'msg': \"Input should be %s\", 'input': '%s', 'ctx': {'expected': \"%s\"}}]", expected, effort, expected)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "BadRequestError", "param": nil, "code": 400}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(b)
	s.mu.Lock()
	s.requests = append(s.requests, body)
	close(s.arrived)
	s.arrived = make(chan struct{})
	s.mu.Unlock()
	return true
}
