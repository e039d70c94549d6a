package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
)

func TestAttachmentsForTheModel(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "cat.png")
	os.WriteFile(png, []byte("\x89PNG fake"), 0o600)
	as := Attachments([]core.Media{
		{Kind: "image", Mime: "image/png", Filename: "cat.png", Size: 9, Path: png},
		{Kind: "document", Mime: "application/pdf", Filename: "a.pdf", Size: 3, Path: filepath.Join(dir, "a.pdf")},
	})
	m := Msg{Role: "user", Content: "look", Attachments: as}
	// A conversation entry keeps them across restarts.
	var back Msg
	b, _ := json.Marshal(m)
	if json.Unmarshal(b, &back); len(back.Attachments) != 2 || back.Attachments[0].Path != png {
		t.Fatalf("round trip: %s", b)
	}
	for _, images := range []bool{false, true} {
		p, _ := json.Marshal(UserParam(m, images))
		s := string(p)
		if !strings.Contains(s, "look") || !strings.Contains(s, "a.pdf") || !strings.Contains(s, filepath.Join(dir, "a.pdf")) {
			t.Errorf("images=%v: the note is missing: %s", images, s)
		}
		if got := strings.Contains(s, "data:image/png;base64,"); got != images {
			t.Errorf("images=%v: inline image %v: %s", images, got, s)
		}
	}
	params := toParams([]Msg{{Role: "system", Content: "s"}, m, {Role: "assistant", Content: "ok"}})
	params = WithAttachments(params, []Msg{{Role: "system", Content: "s"}, m, {Role: "assistant", Content: "ok"}}, true)
	if p, _ := json.Marshal(params[1]); !strings.Contains(string(p), "image_url") {
		t.Errorf("WithAttachments: %s", p)
	}
	if !AcceptsImages("openai/gpt-4o-mini") || !AcceptsImages("qwen2.5-vl-7b") || AcceptsImages("qwen3-27b") || AcceptsImages("echo") {
		t.Error("AcceptsImages guesses wrong")
	}
}
