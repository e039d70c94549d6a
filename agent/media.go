package agent

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/irisgate/irisgate/core"
)

// Attachments reach the model two ways: every file is named with its path
// in a note after the person's text, so tools (read_file, terminal) can
// open it; images also go inline, as image parts, to models that take
// them. The conversation keeps the attachments with the user message, so
// later turns still see them.
//
// Hook for the model backend (model.go), two lines:
//
//	user := Msg{Role: "user", Content: t.Input, MessageID: t.InputID, Attachments: Attachments(t.Media)}
//	Messages: WithAttachments(toParams(msgs), msgs, AcceptsImages(mi.ID)),

// Attachment is a file a person sent with a message.
type Attachment struct {
	Kind     string
	Mime     string
	Filename string
	Size     int64
	Path     string // on the gateway's disk
}

// Attachments lists a turn's media for its user message.
func Attachments(ms []core.Media) []Attachment {
	var out []Attachment
	for _, m := range ms {
		out = append(out, Attachment{Kind: m.Kind, Mime: m.Mime, Filename: m.Filename, Size: m.Size, Path: m.Path})
	}
	return out
}

// MaxInlineImage bounds an image sent inline to the model; bigger ones are
// named in the note only (providers refuse huge images anyway).
const MaxInlineImage = 8 << 20

// inlineMimes are the image types providers accept inline.
var inlineMimes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// AcceptsImages guesses from a model's id whether it takes image input.
// A per-model setting would be exact; the names are a good guess.
func AcceptsImages(model string) bool {
	m := strings.ToLower(model)
	for _, k := range []string{"gpt-4o", "gpt-4.1", "gpt-4-turbo", "gpt-4-vision", "gpt-5", "o1", "o3", "o4", "claude", "gemini",
		"gemma-3", "gemma3", "llama-4", "llama4", "llava", "pixtral", "mistral-small-3", "mistral-medium", "vision", "-vl", "vl-",
		"minicpm-v", "moondream", "internvl", "grok-4", "multimodal", "kimi-k2.5", "glm-4.5v", "glm-4v"} {
		if strings.Contains(m, k) {
			return true
		}
	}
	return false
}

// Note is the text naming a message's attachments for the model.
func Note(as []Attachment) string {
	if len(as) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("[The person attached ")
	if len(as) == 1 {
		b.WriteString("a file")
	} else {
		fmt.Fprintf(&b, "%d files", len(as))
	}
	b.WriteString("; tools can read them at these paths:]")
	for _, a := range as {
		fmt.Fprintf(&b, "\n- %s (%s, %s, %d bytes): %s", a.Filename, a.Kind, a.Mime, a.Size, a.Path)
	}
	return b.String()
}

// UserParam is a person's message for the model: its text with the note
// of its attachments and, when images is set, its images inline.
func UserParam(m Msg, images bool) openai.ChatCompletionMessageParamUnion {
	text := m.Content
	if n := Note(m.Attachments); n != "" {
		if text != "" {
			text += "\n\n"
		}
		text += n
	}
	if !images {
		return openai.UserMessage(text)
	}
	parts := []openai.ChatCompletionContentPartUnionParam{openai.TextContentPart(text)}
	for _, a := range m.Attachments {
		if url := imageURL(a); url != "" {
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
		}
	}
	if len(parts) == 1 {
		return openai.UserMessage(text)
	}
	return openai.UserMessage(parts)
}

// imageURL reads an image attachment into a data URL ("" when it is not
// an image a model takes, too big, or gone).
func imageURL(a Attachment) string {
	if a.Kind != "image" || a.Size > MaxInlineImage || a.Path == "" {
		return ""
	}
	ok := false
	for _, m := range inlineMimes {
		ok = ok || a.Mime == m
	}
	if !ok {
		return ""
	}
	b, err := os.ReadFile(a.Path)
	if err != nil || len(b) > MaxInlineImage {
		return "" // deleted meanwhile: the note still names it
	}
	return "data:" + a.Mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// WithAttachments puts the attachments of msgs' user messages into params,
// the request messages toParams made from msgs (one per message, in
// order). Messages without attachments are left as they are.
func WithAttachments(params []openai.ChatCompletionMessageParamUnion, msgs []Msg, images bool) []openai.ChatCompletionMessageParamUnion {
	if len(params) != len(msgs) {
		return params // not made one to one: leave them be
	}
	for i, m := range msgs {
		if m.Role == "user" && len(m.Attachments) > 0 {
			params[i] = UserParam(m, images)
		}
	}
	return params
}
