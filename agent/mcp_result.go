package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/irisgate/irisgate/sandbox"
)

// render turns a call's result into what the model reads, offering its
// images, audio and binary resources to the person as files of the reply
// (the model is told they were shown). A result the server marks as an
// error is the call's error.
func (s *mcpServer) render(env *ToolEnv, t *mcpTool, res *mcp.CallToolResult) (string, error) {
	if res == nil {
		return "", fmt.Errorf("the MCP server %s answered with no result", s.cfg.Name)
	}
	var b strings.Builder
	files, items, skipped := 0, 0, 0
	budget := maxMCPText // bytes of text, shared by the text parts
	// text adds a text part within what is left of the budget; notes of
	// images and resources are kept whatever the text took, up to
	// maxMCPItems of them.
	text := func(s string) {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
		if len(s) > budget {
			cut := cutAt(s, budget)
			fmt.Fprintf(&b, "%s\n[… %d more bytes cut]", cut, len(s)-len(cut))
			budget = 0
			return
		}
		b.WriteString(s)
		budget -= len(s)
	}
	note := func(format string, args ...any) bool {
		if items >= maxMCPItems {
			skipped++
			return false
		}
		items++
		b.WriteString(truncate(fmt.Sprintf(format, args...), 600))
		return true
	}
	offer := func(data []byte, mimeType, kind, name string) {
		what := fmt.Sprintf("[%s %s, %d bytes", kind, truncate(mimeType, 100), len(data))
		switch {
		case files >= maxMCPFiles:
			note("%s: not shown, one call shows at most %d files]", what, maxMCPFiles)
		case len(data) > maxMCPFile:
			note("%s: not shown, larger than the %d bytes a call may show]", what, maxMCPFile)
		default:
			files++
			if err := offerBytes(env, data, mcpFileName(t.orig, files, name, mimeType), t.name); err != nil {
				note("%s: could not be shown: %v]", what, err)
			} else {
				note("%s: shown to the person]", what)
			}
		}
	}
	for _, c := range res.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch c := c.(type) {
		case *mcp.TextContent:
			text(c.Text)
		case *mcp.ImageContent:
			offer(c.Data, c.MIMEType, "image", "")
		case *mcp.AudioContent:
			offer(c.Data, c.MIMEType, "audio", "")
		case *mcp.ResourceLink:
			desc := strings.TrimSpace(c.Description)
			if desc != "" {
				desc = " " + truncate(desc, 300)
			}
			note("[resource link %s %q (%s)]%s", truncate(c.URI, 200), truncate(c.Name, 100), truncate(c.MIMEType, 100), desc)
		case *mcp.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
				note("[an empty resource]")
			case r.Blob != nil:
				offer(r.Blob, orMIME(r.MIMEType), "resource "+truncate(r.URI, 200), path.Base(r.URI))
			default:
				if note("[resource %s (%s)]\n", truncate(r.URI, 200), truncate(r.MIMEType, 100)) {
					text(r.Text)
				}
			}
		default:
			note("[content of a kind irisgate does not show (%T)]", c)
		}
	}
	if skipped > 0 {
		fmt.Fprintf(&b, "\n[… %d more images, files or resources not shown]", skipped)
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if j, err := json.Marshal(res.StructuredContent); err == nil {
			text(string(j))
		}
	}
	out := b.String()
	if res.IsError {
		if out == "" {
			out = "the tool failed and said nothing"
		}
		return "", errors.New(out)
	}
	return out, nil
}

func orMIME(m string) string {
	if m == "" {
		return "application/octet-stream"
	}
	return m
}

// boundText is what a model may read of an untrusted text: valid UTF-8
// without NULs, its head within n bytes and a note of what was cut.
func boundText(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s\n[… %d more bytes cut]", truncate(s, n), len(s)-n)
}

// cutAt is s's head within n bytes, cut between characters.
func cutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)]
}

// maxMCPItems bounds the notes of images, files and resources one call's
// text holds.
const maxMCPItems = 32

// mcpFileName names a file a call shows: after the resource, or the tool,
// with an extension of its type (the media store finds the real type by
// itself).
func mcpFileName(tool string, n int, name, mimeType string) string {
	ext := mcpExt[strings.ToLower(strings.TrimSpace(strings.SplitN(mimeType, ";", 2)[0]))]
	if ext == "" {
		ext = ".bin"
	}
	base := strings.TrimSuffix(name, path.Ext(name))
	if base == "" || base == "." || base == "/" {
		base = fmt.Sprintf("%s-%d", tool, n)
	}
	clean := []byte(base)
	for i, c := range clean {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			clean[i] = '_'
		}
	}
	return truncate(string(clean), 80) + ext
}

var mcpExt = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
	"audio/wav": ".wav", "audio/x-wav": ".wav", "audio/mpeg": ".mp3", "audio/ogg": ".ogg",
	"application/pdf": ".pdf", "text/plain": ".txt", "application/json": ".json", "application/gzip": ".gz",
	"application/zip": ".zip",
}

// offerBytes offers data to the devices as a file of the reply, the way
// send_file does.
func offerBytes(env *ToolEnv, data []byte, name, caption string) error {
	p, done, _, err := sandbox.CopyOut(bytes.NewReader(data), name)
	if err != nil {
		return err
	}
	defer done()
	env.emit(Event{Kind: File, Path: p, Text: caption})
	return nil
}
