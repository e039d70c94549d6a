package slash

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		text, name, args string
		ok               bool
	}{
		{"/new", "/new", "", true},
		{"  /NEW  ", "/new", "", true},
		{"/steer go left\nand then right ", "/steer", "go left\nand then right", true},
		{"/title   Trip to Lisbon", "/title", "Trip to Lisbon", true},
		{"/cron add 0 9 * * * | water the plants", "/cron", "add 0 9 * * * | water the plants", true},
		{"/a-b_c x", "/a-b_c", "x", true},
		{"/usr/bin is where it lives", "", "", false}, // a path, for the model
		{"/", "", "", false},
		{"//new", "", "", false},
		{"/9lives", "", "", false},
		{"hello /new", "", "", false},
		{"", "", "", false},
	} {
		name, args, ok := Parse(c.text)
		if name != c.name || args != c.args || ok != c.ok {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q, %v", c.text, name, args, ok, c.name, c.args, c.ok)
		}
		if Is(c.text) != c.ok {
			t.Errorf("Is(%q) = %v", c.text, !c.ok)
		}
	}
}

// The catalog is what devices show: every entry is reachable by its name
// and its aliases, and no name is claimed twice.
func TestCatalogIsConsistent(t *testing.T) {
	seen := map[string]string{}
	for _, c := range Catalog() {
		if c.run == nil || c.Description == "" || c.Category == "" {
			t.Errorf("%s: incomplete entry %+v", c.Name, c)
		}
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if prev, dup := seen[n]; dup {
				t.Errorf("%s is claimed by %s and %s", n, prev, c.Name)
			}
			seen[n] = c.Name
			if name, args, ok := Parse(n); !ok || name != n || args != "" {
				t.Errorf("%s does not parse as itself: %q %q %v", n, name, args, ok)
			}
			if f := find(n); f == nil || f.Name != c.Name {
				t.Errorf("find(%s) = %v", n, f)
			}
			if m := Complete(n); len(m) == 0 || m[0].Name != c.Name {
				t.Errorf("Complete(%s) does not put %s first", n, c.Name)
			}
		}
	}
	if find("/nope") != nil {
		t.Error("find made up a command")
	}
}

func names(cs []Command) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// Prefix matches come first, in catalog order (an alias counts), then
// the fuzzy ones, whose letters come in order.
func TestComplete(t *testing.T) {
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"/mod", []string{"/model"}},
		{"/res", []string{"/new", "/reasoning"}},                        // /reset is /new's alias; /reasoning is r…e…s
		{"st", []string{"/stop", "/steer", "/status", "/new", "/fast"}}, // the slash is optional; /reset and /fast are fuzzy
		{"/YO", []string{"/yolo"}},                                      // case does not matter
		{"/rsng", []string{"/reasoning"}},                               // fuzzy only
		{"/zzz", nil},
	} {
		if got := names(Complete(c.prefix)); !slices.Equal(got, c.want) {
			t.Errorf("Complete(%q) = %v, want %v", c.prefix, got, c.want)
		}
	}
	if got := names(Complete("/")); !slices.Equal(got, names(Catalog())) {
		t.Errorf("Complete(/) = %v, want the whole catalog", got)
	}
}

func TestTypos(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"/stop", "/stop", 0},
		{"/stpo", "/stop", 1}, // a transposition is one typo
		{"/stp", "/stop", 1},
		{"/sttop", "/stop", 1},
		{"/hepl", "/help", 1},
		{"/modle", "/model", 1},
		{"/xyz", "/new", 3},
		{"", "/new", 4},
		{"/é", "/e", 1}, // runes, not bytes
	} {
		if d := typos(c.a, c.b); d != c.d {
			t.Errorf("typos(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}

func TestSuggest(t *testing.T) {
	for _, c := range []struct{ typed, want string }{
		{"/stpo", "/stop"},   // a transposition
		{"/hlep", "/help"},   // two letters swapped
		{"/retyr", "/retry"}, // one typo away, no completion
		{"/mod", "/model"},   // a completion wins
		{"/rst", "/new"},     // fuzzy: /reset's letters are /new's
		{"/zanzibar", ""},    // nothing near it
	} {
		if got := suggest(c.typed); got != c.want {
			t.Errorf("suggest(%q) = %q, want %q", c.typed, got, c.want)
		}
	}
}

// recorder is an Env that keeps what the commands did. Methods a test did
// not expect panic (the embedded Env is nil): a command that reaches for
// more than it should fails its test.
type recorder struct {
	Env
	said  []string
	calls []string
	from  []hub.Caller
}

func (r *recorder) SystemMessage(_ context.Context, _ core.Lane, text string) {
	r.said = append(r.said, text)
}

func (r *recorder) Stop(_ context.Context, from hub.Caller, _ core.Lane) error {
	r.calls, r.from = append(r.calls, "stop"), append(r.from, from)
	return nil
}

func (r *recorder) DropQueued(context.Context, core.Lane) (int, error) {
	r.calls = append(r.calls, "drop")
	return 2, nil
}

func (r *recorder) Steer(_ context.Context, from hub.Caller, _ core.Lane, text string) error {
	r.calls, r.from = append(r.calls, "steer "+text), append(r.from, from)
	return nil
}

var lane = core.Lane{ChatID: "default"}

func TestRunAnswersAnUnknownCommand(t *testing.T) {
	r := &recorder{}
	Run(context.Background(), r, hub.Caller{}, lane, "/stpo", "")
	if len(r.said) != 1 || r.said[0] != "Unknown command /stpo. Did you mean /stop? Type /help for the list." {
		t.Fatalf("said %q", r.said)
	}
	r = &recorder{}
	Run(context.Background(), r, hub.Caller{}, lane, "/zanzibar", "")
	if len(r.said) != 1 || r.said[0] != "Unknown command /zanzibar. Type /help for the list." {
		t.Fatalf("said %q", r.said)
	}
}

// A command's error is said in the lane, prefixed with the command.
func TestRunSaysWhyACommandFailed(t *testing.T) {
	r := &recorder{}
	Run(context.Background(), r, hub.Caller{}, lane, "/title", "")
	if len(r.said) != 1 || r.said[0] != "/title: usage: /title <name>" {
		t.Fatalf("said %q", r.said)
	}
	r = &recorder{}
	Run(context.Background(), r, hub.Caller{}, lane, "/stop", "now")
	if len(r.said) != 1 || !strings.HasPrefix(r.said[0], "/stop: use /stop (the running turn) or /stop all") || len(r.calls) != 0 {
		t.Fatalf("said %q, did %q", r.said, r.calls)
	}
}

// /stop all drops the queue before it stops the turn: stopping first would
// start the next queued turn.
func TestStopAllDropsTheQueueFirst(t *testing.T) {
	r := &recorder{}
	Run(context.Background(), r, hub.Caller{}, lane, "/stop", "ALL")
	if !slices.Equal(r.calls, []string{"drop", "stop"}) {
		t.Fatalf("did %q", r.calls)
	}
	if len(r.said) != 1 || r.said[0] != "⏹ Stopped; dropped 2 queued messages (they stay in the chat, unanswered)." {
		t.Fatalf("said %q", r.said)
	}
}

// The message that typed the command has had its reply (the echo): what
// the command does answers no request of the caller again.
func TestRunAnswersNoRequestTwice(t *testing.T) {
	c := &hub.Conn{ID: 7}
	r := &recorder{}
	Run(context.Background(), r, hub.Caller{Conn: c, ReqID: 42}, lane, "/steer", "left")
	if !slices.Equal(r.calls, []string{"steer left"}) || r.from[0].Conn != c || r.from[0].Reply() != nil {
		t.Fatalf("did %q from %+v", r.calls, r.from)
	}
}
