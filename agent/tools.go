package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/sandbox"
)

// Tool is something the model can call.
type Tool struct {
	Name        string
	Description string
	Emoji       string
	Params      map[string]any // JSON Schema of the arguments
	// Preview is a one-line summary of a call for tool.start.
	Preview func(args map[string]any) string
	// Run does the work; progress reports a note while it runs. The
	// returned text goes back to the model.
	Run func(ctx context.Context, env *ToolEnv, args map[string]any, progress func(string)) (string, error)
}

// ToolEnv is what tools of one turn share.
type ToolEnv struct {
	Cwd   string
	Asker Asker
	Yolo  bool
	Todos []core.Todo
	// Lane is the conversation the turn runs in: where new cron jobs post
	// unless told otherwise.
	Lane core.Lane
	// Cron manages scheduled jobs; nil where the gateway offers none.
	Cron Cron
	emit func(Event)
}

// Tools is the set of tools offered to the model, with the limits and the
// approval policy they run under.
type Tools struct {
	List []*Tool
	// Sets are tools that come and go while the gateway runs (those of
	// MCP servers), asked for their list at each model call.
	Sets []ToolSet
	// Sandbox walls the terminal's commands in and tells the file tools
	// what they may never open; nil: no walls (every command that is not
	// read-only asks).
	Sandbox *sandbox.Sandbox
	// Mode is the approval mode of lanes that chose none (default
	// AskOutside).
	Mode ApprovalMode
	// Policy lists the clearly destructive commands asked about even
	// inside the sandbox, as a courtesy.
	Policy *Policy
	// Timeout bounds one terminal command; OutputCap the output kept.
	Timeout   time.Duration
	OutputCap int
	// ProgressEvery is how often a running terminal command reports
	// tool.progress (default 2 s).
	ProgressEvery time.Duration
	// MaxFile is the largest file send_file offers: the gateway's media
	// limit (serve's --max-media; default 64 MiB).
	MaxFile int64
}

// ToolSet is a changing set of tools.
type ToolSet interface {
	Tools() []*Tool
}

// all is every tool offered now.
func (ts *Tools) all() []*Tool {
	out := ts.List
	for _, s := range ts.Sets {
		out = append(out[:len(out):len(out)], s.Tools()...)
	}
	return out
}

func (ts *Tools) params() []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, t := range ts.all() {
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: t.Params,
		}))
	}
	return out
}

func (ts *Tools) find(name string) *Tool {
	for _, t := range ts.all() {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// run executes one call, reporting tool.start/progress/end, and returns
// what the model is told.
func (ts *Tools) run(ctx context.Context, env *ToolEnv, index int, call ToolCall) string {
	t := ts.find(call.Name)
	var args map[string]any
	argErr := json.Unmarshal([]byte(orEmpty(call.Arguments)), &args)
	ev := &core.Tool{Index: index, Name: call.Name, Args: args}
	if t != nil {
		ev.Emoji = t.Emoji
		if t.Preview != nil && argErr == nil {
			ev.Preview = truncate(t.Preview(args), 120)
		}
	}
	env.emit(Event{Kind: ToolStart, Tool: ev})
	start := time.Now()
	var out string
	var err error
	switch {
	case t == nil:
		err = fmt.Errorf("there is no tool named %q", call.Name)
	case argErr != nil:
		err = fmt.Errorf("the arguments are not a JSON object: %v", argErr)
	default:
		out, err = t.Run(ctx, env, args, func(note string) {
			env.emit(Event{Kind: ToolProgress, Tool: &core.Tool{Index: index, Name: call.Name, Note: note}})
		})
	}
	end := &core.Tool{Index: index, Name: call.Name, OK: err == nil, Duration: roundMillis(time.Since(start))}
	if err != nil {
		out = "error: " + err.Error()
	}
	end.Output = tail(out, 200)
	env.emit(Event{Kind: ToolEnd, Tool: end})
	return out
}

func roundMillis(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

func orEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

// tail keeps the end of s, where a command's outcome usually is.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && (s[cut]&0xC0) == 0x80 {
		cut++
	}
	return "…" + s[cut:]
}

// Policy says which commands are dangerous enough to ask about.
type Policy struct {
	Rules []Rule
}

// Rule is one dangerous-command pattern.
type Rule struct {
	Pattern     *regexp.Regexp
	Description string
}

// DefaultRules are the patterns asked about unless configured otherwise.
func DefaultRules() []Rule {
	r := func(p, d string) Rule { return Rule{regexp.MustCompile(p), d} }
	return []Rule{
		r(`\brm\s+(-\S*\s+)*-\S*[rRf]`, "deletes files recursively or by force"),
		r(`\bsudo\b|\bsu\s+-?\s*\w*\s*-c\b|\bdoas\b`, "runs with root privileges"),
		r(`\bmkfs(\.\w+)?\b|\bfdisk\b|\bparted\b|\bwipefs\b`, "formats or partitions a disk"),
		r(`\bdd\b.*\bof=/dev/`, "writes raw data to a device"),
		r(`>\s*/dev/(sd|nvme|hd|vd)`, "overwrites a disk device"),
		r(`\bchmod\s+(-\S+\s+)*0?777\b|\bchown\s+-R\b`, "changes permissions broadly"),
		r(`\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b`, "runs a script straight from the network"),
		r(`\b(shutdown|reboot|halt|poweroff)\b|\bsystemctl\s+(stop|disable|mask)\b`, "stops the machine or its services"),
		r(`\bgit\s+push\b.*(--force|-f\b)|\bgit\s+reset\s+--hard\b|\bgit\s+clean\s+-\S*f`, "rewrites or discards git history or files"),
		r(`:\(\)\s*\{.*\};\s*:`, "is a fork bomb"),
		r(`\bkill(all)?\s+(-9\s+)?(-1|1)\b`, "kills every process"),
		r(`(^|[^<&0-9])>>?\s*(/|~)`, "writes to a file outside the working directory"),
	}
}

// harmlessRedirect is output thrown away, sent where it goes anyway, or
// sent to the network (bash's /dev/tcp, which the sandbox keeps offline
// unless the person allows it): not a write to a file outside the working
// directory.
var harmlessRedirect = regexp.MustCompile(`[0-9&]?>>?\s*/dev/((null|stdout|stderr)\b|(tcp|udp)/)`)

// Check returns why command is dangerous, or "" when it is not.
func (p *Policy) Check(command string) string {
	if p == nil {
		return ""
	}
	command = harmlessRedirect.ReplaceAllString(command, "")
	for _, r := range p.Rules {
		if r.Pattern.MatchString(command) {
			return "This command " + r.Description + "."
		}
	}
	return ""
}

func str(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return s
}
