package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

func hexSum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// pattern is n bytes that are not all alike.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// mediaFiles lists the files in a gateway's media directory, partial ones
// included.
func mediaFiles(t *testing.T, g *testgw.GW) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(g.Dir, server.MediaDir), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestSendFileCommand(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Media = media.Limits{MaxSize: 3 << 20} })
	d := g.Dial(t, "laptop")
	data := pattern(5 << 20 / 2) // 2.5 MiB: large enough to report progress
	path := filepath.Join(t.TempDir(), "backup.tar")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := &SendCmd{dataFlag: dataFlag{Data: g.Dir}, To: "default", File: path, Text: "Tonight's backup"}
	if err := cmd.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.send(context.Background(), nil, &stdout, &stderr); err != nil {
		t.Fatalf("send: %v (stderr: %s)", err, stderr.String())
	}
	msgID := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(msgID, "m_") {
		t.Fatalf("stdout %q, want the message id", stdout.String())
	}
	progress := regexp.MustCompile(`sending backup\.tar: [0-9.]+ (KiB|MiB) of 2\.5 MiB \((\d+)%\)`).FindAllStringSubmatch(stderr.String(), -1)
	if len(progress) < 2 || progress[len(progress)-1][2] != "100" {
		t.Fatalf("progress on stderr: %q", stderr.String())
	}
	done := regexp.MustCompile(`sent backup\.tar \(2\.5 MiB, sha256 ([0-9a-f]{64})\) as (md_\S+)`).FindStringSubmatch(stderr.String())
	if done == nil || done[1] != hexSum(data) {
		t.Fatalf("result on stderr: %q", stderr.String())
	}

	m := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == msgID })
	var p struct {
		Role  string `json:"role"`
		Text  string `json:"text"`
		Media []struct {
			MediaID  string `json:"media_id"`
			Filename string `json:"filename"`
			Size     int64  `json:"size"`
		} `json:"media"`
	}
	m.Decode(&p)
	if p.Role != "cron" || p.Text != "Tonight's backup" || len(p.Media) != 1 || p.Media[0].MediaID != done[2] ||
		p.Media[0].Filename != "backup.tar" || p.Media[0].Size != int64(len(data)) {
		t.Fatalf("message %s", m.Raw)
	}
	md, err := g.App.Store.Media(context.Background(), done[2])
	if err != nil {
		t.Fatal(err)
	}
	stored, err := os.ReadFile(g.App.Media.Path(md.SHA256))
	if err != nil || !bytes.Equal(stored, data) {
		t.Fatalf("the stored file differs from the one sent (%d bytes, %v)", len(stored), err)
	}

	// A small file: no progress, just the result.
	small := filepath.Join(t.TempDir(), "note.txt")
	os.WriteFile(small, []byte("hello\n"), 0o600)
	stdout.Reset()
	stderr.Reset()
	if err := (&SendCmd{dataFlag: dataFlag{Data: g.Dir}, To: "default", File: small}).send(context.Background(), nil, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stderr.String(), "sending") || !strings.HasPrefix(stderr.String(), "sent note.txt (6 B,") {
		t.Fatalf("stderr %q", stderr.String())
	}
}

func TestSendFileCommandRefused(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Media = media.Limits{MaxSize: 1 << 20} })
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	os.WriteFile(big, pattern(4<<20), 0o600)
	var stdout, stderr bytes.Buffer
	err := (&SendCmd{dataFlag: dataFlag{Data: g.Dir}, To: "default", File: big}).send(context.Background(), nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "media_too_large") || !strings.Contains(err.Error(), "limit of 1048576 bytes") {
		t.Fatalf("too large: %v", err)
	}
	if stdout.Len() != 0 {
		t.Fatalf("stdout %q", stdout.String())
	}
	if left := mediaFiles(t, g); len(left) != 0 {
		t.Fatalf("files left behind: %v", left)
	}
	small := filepath.Join(dir, "ok.txt")
	os.WriteFile(small, []byte("ok"), 0o600)
	err = (&SendCmd{dataFlag: dataFlag{Data: g.Dir}, To: "chan_nope", File: small}).send(context.Background(), nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("unknown channel: %v", err)
	}
	if err := (&SendCmd{To: "default"}).Validate(); err == nil {
		t.Fatal("neither --text nor --file was accepted")
	}
}

func TestSendTextCommand(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "laptop")
	var stdout, stderr bytes.Buffer
	cmd := &SendCmd{dataFlag: dataFlag{Data: g.Dir}, To: "default", Text: "-"}
	if err := cmd.send(context.Background(), strings.NewReader("disk almost full"), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(stdout.String())
	m := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == id })
	if testgw.Str(t, m, "text") != "disk almost full" || testgw.Str(t, m, "role") != "cron" {
		t.Fatalf("message %s", m.Raw)
	}
}

// TestCronCommands runs irisgate cron through its real command line, on
// a data directory no gateway runs on: the actions share cron.Act with
// /cron and the agent's tool, and each says what it did.
func TestCronCommands(t *testing.T) {
	dir := t.TempDir()
	cli := func(args ...string) (int, string, string) { return irisgate(t, append(args, "--data", dir)...) }
	code, out, errOut := cli("cron", "add", "every 2h", "--text", "Drink water", "--name", "water")
	if code != 0 || !strings.HasPrefix(out, "added cron_") || !strings.Contains(out, `"water" into default, next run `) ||
		!strings.Contains(errOut, "no gateway is running") {
		t.Fatalf("add: %d %q %q", code, out, errOut)
	}
	jobs := func() []store.CronJob {
		st, err := store.Open(filepath.Join(dir, server.DBFile))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		js, _ := st.CronJobs(context.Background())
		return js
	}
	js := jobs()
	if len(js) != 1 || js[0].Name != "water" || js[0].ChatID != "default" {
		t.Fatalf("jobs %+v", js)
	}
	id := js[0].ID
	for _, step := range []struct {
		action, says  string
		enabled, kept bool
	}{
		{"pause", `paused ` + id + ` "water": it will not run until resumed`, false, true},
		{"resume", `resumed ` + id + ` "water", next run `, true, true},
		{"pause", `paused `, false, true},
		{"run", id + ` "water" will run into default as soon as a gateway starts on ` + dir, true, true},
		{"rm", `removed ` + id + ` "water"`, false, false},
	} {
		code, out, errOut := cli("cron", step.action, id)
		if code != 0 || !strings.HasPrefix(out, step.says) {
			t.Fatalf("%s: %d %q %q", step.action, code, out, errOut)
		}
		js := jobs()
		if enabled, found := len(js) == 1 && js[0].Enabled, len(js) == 1; enabled != step.enabled || found != step.kept {
			t.Fatalf("after %s: enabled %v, kept %v", step.action, enabled, found)
		}
		if step.action == "pause" {
			// A paused job shows no next run.
			_, list, _ := cli("cron", "list")
			if row := lineWith(list, id); !strings.Contains(row, "paused") || !strings.HasSuffix(strings.TrimSpace(row), "-") {
				t.Fatalf("cron list after pause:\n%s", list)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"cron", "pause", id}, "irisgate: no cron job"},
		{[]string{"cron", "add", "whenever", "--text", "x"}, "not a schedule"},
		{[]string{"cron", "add", "every 1h", "--text", "x", "--to", "chan_nope"}, "unknown channel"},
	} {
		code, out, errOut := cli(tc.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, tc.says) || strings.Contains(errOut, "Usage:") {
			t.Fatalf("%v: %d %q %q", tc.args, code, out, errOut)
		}
	}
}

// lineWith is the line of text that contains s.
func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
