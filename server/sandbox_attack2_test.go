package server_test

// The file tools and the approvals as the reviewer attacked them after
// issue 13: the read-only list without a wall, /yolo where Landlock cannot
// hide the data directory, reads whose file is swapped while the person
// decides, send_file past the media limit, write_file through a link into
// .git/hooks.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/kernel"
	"github.com/irisgate/irisgate/sandbox"
	"github.com/irisgate/irisgate/server"
)

func gitInit(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
}

// TestSandboxNoWallReadOnlyListHolds: with no wall and the data directory
// inside the working directory (the defaults' layout), nothing on the
// read-only list reads the gateway's keys or runs what a planted file
// says: write_file refuses .git and asks for the rest, git is not
// read-only, an argument that resolves into the data directory (or a
// recursive read over it) asks.
func TestSandboxNoWallReadOnlyListHolds(t *testing.T) {
	r, _ := sbRig(t, sandbox.None, true)
	gitInit(t, r.work)
	if err := os.WriteFile(filepath.Join(r.dir, "vapid.json"), []byte("PRIVATE-VAPID"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("irisgate-data", filepath.Join(r.work, "innocent")); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(r.work, ".git", "config")
	before, _ := os.ReadFile(config)
	monitor := "[core]\n\tfsmonitor = \"cat irisgate-data/vapid.json > stolen.txt; false\"\n"
	r.sbCall("write_file", "path", ".git/config", "content", string(before)+monitor)
	steals := []string{"git status", "cat irisgate-data/vapid.json", "cat innocent/vapid.json", "grep -r PRIVATE"}
	for _, c := range steals {
		r.sbCall("terminal", "command", c)
	}
	r.sbCall("write_file", "path", "notes.txt", "content", "plain work")
	r.sbCall("terminal", "command", "ls")
	r.reply("done")
	a := r.dial("phone")
	send(t, a, def, "steal the keys")
	for _, c := range steals {
		p := sbApproval(t, a)
		if p.Command != c || !strings.Contains(p.Description, "no sandbox") {
			t.Fatalf("the approval for %q: %+v", c, p)
		}
		selectChoice(t, a, p.PickerID, "deny")
	}
	p := sbApproval(t, a)
	if p.Command != "write "+filepath.Join(r.work, "notes.txt") || !strings.Contains(p.Description, "no sandbox") {
		t.Fatalf("write_file without a wall: %+v", p)
	}
	selectChoice(t, a, p.PickerID, "once")
	got := until(t, a, is(t, "agent.idle"))
	none(t, "ls, read-only", got, is(t, "picker.approval"))
	reqs := r.requests(len(steals) + 4)
	if !agSaid(t, reqs[1], "tool", "refused") || !agSaid(t, reqs[1], "tool", ".git") {
		t.Fatalf("write_file .git/config: %v", agLast(t, reqs[1]))
	}
	for _, req := range reqs {
		if agSaid(t, req, "tool", "PRIVATE-VAPID") {
			t.Fatalf("the key reached the model: %v", agLast(t, req))
		}
	}
	if b, _ := os.ReadFile(config); strings.Contains(string(b), "fsmonitor") {
		t.Fatal(".git/config was written")
	}
	if _, err := os.Stat(filepath.Join(r.work, "stolen.txt")); err == nil {
		t.Fatal("the planted fsmonitor ran")
	}
	if b, _ := os.ReadFile(filepath.Join(r.work, "notes.txt")); string(b) != "plain work" {
		t.Fatalf("notes.txt: %q", b)
	}
	if out := toolSaid(t, reqs, len(reqs)-1); !strings.Contains(out, "notes.txt") {
		t.Fatalf("ls: %q", out)
	}
}

// TestSandboxYoloKeepsAskingWithoutAWall: where Landlock cannot hide the
// data directory lying in the working directory, /yolo still asks before
// a command that is not read-only, and before one whose argument lands in
// the data directory.
func TestSandboxYoloKeepsAskingWithoutAWall(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", sbKey)
	t.Setenv("IRISGATE_TEST_SANDBOX", "landlock")
	r := &agRig{t: t, fake: fakeopenai.New(t), work: t.TempDir()}
	r.dir = filepath.Join(r.work, "irisgate-data")
	sb := agSandbox(t, r.work, r.dir)
	kernel.Require(t, sb.Wall(), sandbox.Landlock)
	r.start()
	if w := sb.WallFor(r.work); w != sandbox.None {
		t.Fatalf("Landlock with the data directory inside the working directory: %v", w)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "vapid.json"), []byte("PRIVATE-VAPID"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := r.dial("phone")
	send(t, a, def, "/yolo")
	agSystemReply(t, a, "YOLO")
	steals := []string{"cat irisgate-data/vapid.json", "base64 irisgate-data/vapid.json"}
	for _, c := range steals {
		r.sbCall("terminal", "command", c)
	}
	r.reply("tried")
	send(t, a, def, "read the keys")
	for _, c := range steals {
		p := sbApproval(t, a)
		if p.Command != c || !strings.Contains(p.Description, "/yolo does not change that") {
			t.Fatalf("under /yolo: %+v", p)
		}
		selectChoice(t, a, p.PickerID, "deny")
	}
	until(t, a, is(t, "agent.idle"))
	for _, req := range r.requests(len(steals) + 1) {
		if agSaid(t, req, "tool", "PRIVATE-VAPID") {
			t.Fatal("the key reached the model")
		}
	}
}

// TestSandboxReadOutsideShowsWhatItOpens: a read outside the working
// directory asks about the file the path resolves to, by that name; a file
// put in its place while the person decides is refused, not read; and an
// answer "for this session" holds for that file, not for whatever the
// link points at later.
func TestSandboxReadOutsideShowsWhatItOpens(t *testing.T) {
	r, outside := sbRig(t, sandbox.Namespaces, false)
	keep, deep, link := filepath.Join(outside, "keep.txt"), filepath.Join(outside, "sub", "deep.txt"), filepath.Join(outside, "link")
	if err := os.Symlink("keep.txt", link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(other, []byte("swapped in"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r.sbCall("read_file", "path", link)
	}
	r.reply("read")
	a := r.dial("phone")
	send(t, a, def, "read the link")
	p := sbApproval(t, a)
	if p.Command != "read "+keep || !strings.Contains(p.Description, link+" leads to "+keep) {
		t.Fatalf("the approval shows %+v", p)
	}
	if err := os.Rename(other, keep); err != nil { // while the person decides
		t.Fatal(err)
	}
	selectChoice(t, a, p.PickerID, "once")
	p = sbApproval(t, a)
	if p.Command != "read "+keep {
		t.Fatalf("the second approval: %+v", p)
	}
	selectChoice(t, a, p.PickerID, "session")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/deep.txt", link); err != nil {
		t.Fatal(err)
	}
	p = sbApproval(t, a) // the session's answer was for keep.txt
	if p.Command != "read "+deep {
		t.Fatalf("after the link moved: %+v", p)
	}
	selectChoice(t, a, p.PickerID, "deny")
	until(t, a, is(t, "agent.idle"))
	reqs := r.requests(4)
	if out := toolSaid(t, reqs, 1); !strings.Contains(out, "not the file that was approved") || strings.Contains(out, "swapped in") {
		t.Fatalf("the read after the swap: %q", out)
	}
	if out := toolSaid(t, reqs, 2); out != "swapped in" {
		t.Fatalf("the read approved after the swap: %q", out)
	}
	if out := toolSaid(t, reqs, 3); !strings.Contains(out, "denied") || strings.Contains(out, "deep") {
		t.Fatalf("the read after the link moved: %q", out)
	}
}

// TestSandboxSendFileChecksTheLimitFirst: a file over the gateway's media
// limit is not copied nor offered, and the model hears so, with the path
// it named.
func TestSandboxSendFileChecksTheLimitFirst(t *testing.T) {
	const limit = 1024
	r, _ := sbRig(t, sandbox.Namespaces, false,
		agWithModel(func(mc *agent.ModelConfig) { mc.Tools.MaxFile = limit }),
		agWithApp(func(c *server.AppConfig) { c.Media.MaxSize = limit }))
	if err := os.WriteFile(filepath.Join(r.work, "big.bin"), make([]byte, 2*limit), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.work, "small.txt"), []byte("fits"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.sbCall("send_file", "path", "big.bin")
	r.sbCall("send_file", "path", "small.txt")
	r.reply("sent")
	a := r.dial("phone")
	got := agTurn(t, a, def, "send the files")
	reqs := r.requests(3)
	want := fmt.Sprintf("not sent: %s is 2.0 KiB; the gateway sends files of at most 1.0 KiB (--max-media)", filepath.Join(r.work, "big.bin"))
	if out := toolSaid(t, reqs, 1); !strings.Contains(out, want) {
		t.Fatalf("send_file of a file over the limit: %q", out)
	}
	if out := toolSaid(t, reqs, 2); !strings.Contains(out, "offered "+filepath.Join(r.work, "small.txt")+" (4 bytes)") {
		t.Fatalf("send_file of a file that fits: %q", out)
	}
	for _, f := range got {
		if f.Type == "message" && strings.Contains(string(f.Raw), "could not be offered") {
			t.Fatalf("the gateway had to refuse it: %s", f.Raw)
		}
	}
}

// TestSandboxWriteFileShowsWhereItLands: write_file through a link shows
// (and writes) the link's target; a target in .git (a hook, the config),
// by a link or by name, is refused, and behind the namespaces wall a
// command cannot write there either.
func TestSandboxWriteFileShowsWhereItLands(t *testing.T) {
	r, _ := sbRig(t, sandbox.Namespaces, false)
	gitInit(t, r.work)
	for link, target := range map[string]string{"innocent": ".git/hooks/pre-commit", "alias": "notes.txt"} {
		if err := os.Symlink(target, filepath.Join(r.work, link)); err != nil {
			t.Fatal(err)
		}
	}
	a := r.dial("phone")
	send(t, a, def, "/approvals ask")
	agSystemReply(t, a, "everything that is not read-only asks")
	r.sbCall("write_file", "path", "innocent", "content", "#!/bin/sh\ntouch pwned\n")
	r.sbCall("write_file", "path", ".git/config", "content", "[core]\n\thooksPath = /tmp\n")
	r.sbCall("write_file", "path", "alias", "content", "through the link")
	r.sbCall("terminal", "command", "echo 'touch pwned' > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout")
	r.reply("written")
	send(t, a, def, "write")
	p := sbApproval(t, a)
	if p.Command != "write "+filepath.Join(r.work, "notes.txt") || !strings.Contains(p.Description, "alias is a link to "+filepath.Join(r.work, "notes.txt")) {
		t.Fatalf("write_file through a link: %+v", p)
	}
	selectChoice(t, a, p.PickerID, "once")
	p = sbApproval(t, a)
	selectChoice(t, a, p.PickerID, "once") // the command: the wall holds
	until(t, a, is(t, "agent.idle"))
	reqs := r.requests(5)
	for _, i := range []int{1, 2} {
		if out := toolSaid(t, reqs, i); !strings.Contains(out, "refused") || !strings.Contains(out, ".git directory") {
			t.Fatalf("write_file into .git: %q", out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(r.work, "notes.txt")); string(b) != "through the link" {
		t.Fatalf("notes.txt: %q", b)
	}
	for _, hook := range []string{"pre-commit", "post-checkout"} {
		if _, err := os.Stat(filepath.Join(r.work, ".git", "hooks", hook)); err == nil {
			t.Fatalf("a %s hook was planted", hook)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(r.work, ".git", "config")); strings.Contains(string(b), "hooksPath") {
		t.Fatal(".git/config was written")
	}
}
