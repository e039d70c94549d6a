package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

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
	files := 0
	offer := func(data []byte, mimeType, kind, name string) {
		fmt.Fprintf(&b, "[%s %s, %d bytes", kind, mimeType, len(data))
		switch {
		case files >= maxMCPFiles:
			fmt.Fprintf(&b, ": not shown, one call shows at most %d files]", maxMCPFiles)
		case len(data) > maxMCPFile:
			fmt.Fprintf(&b, ": not shown, larger than the %d bytes a call may show]", maxMCPFile)
		default:
			files++
			if err := offerBytes(env, data, mcpFileName(t.orig, files, name, mimeType), t.name); err != nil {
				fmt.Fprintf(&b, ": could not be shown: %v]", err)
			} else {
				b.WriteString(": shown to the person]")
			}
		}
	}
	for _, c := range res.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			offer(c.Data, c.MIMEType, "image", "")
		case *mcp.AudioContent:
			offer(c.Data, c.MIMEType, "audio", "")
		case *mcp.ResourceLink:
			fmt.Fprintf(&b, "[resource link %s", c.URI)
			if c.Name != "" {
				fmt.Fprintf(&b, " %q", c.Name)
			}
			if c.MIMEType != "" {
				b.WriteString(" (" + c.MIMEType + ")")
			}
			b.WriteString("]")
			if d := strings.TrimSpace(c.Description); d != "" {
				b.WriteString(" " + truncate(d, 500))
			}
		case *mcp.EmbeddedResource:
			r := c.Resource
			if r == nil {
				b.WriteString("[an empty resource]")
				break
			}
			if r.Blob != nil {
				offer(r.Blob, orMIME(r.MIMEType), "resource "+r.URI, path.Base(r.URI))
				break
			}
			fmt.Fprintf(&b, "[resource %s", r.URI)
			if r.MIMEType != "" {
				b.WriteString(" (" + r.MIMEType + ")")
			}
			b.WriteString("]\n" + r.Text)
		default:
			fmt.Fprintf(&b, "[content of a kind irisgate does not show (%T)]", c)
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if j, err := json.Marshal(res.StructuredContent); err == nil {
			b.Write(j)
		}
	}
	out := boundText(b.String(), maxMCPText)
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
	p, done, err := sandbox.CopyOut(bytes.NewReader(data), name)
	if err != nil {
		return err
	}
	defer done()
	env.emit(Event{Kind: File, Path: p, Text: caption})
	return nil
}
