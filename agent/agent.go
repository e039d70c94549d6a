// Package agent defines what the gateway asks of an agent backend: run one
// turn and report what happens as events. Backends: the demo echo agent
// (this package) and, in their own files, real model runtimes.
package agent

import (
	"context"

	"github.com/irisgate/irisgate/core"
)

// Turn is one request to the agent in one lane.
type Turn struct {
	Lane  core.Lane
	Input string
	// InputID is the id of the person's message, kept on the conversation
	// entry so deleting the message can delete it from the conversation.
	InputID string
	Media   []core.Media
	// Steer delivers texts a person sends while the turn runs; a backend
	// injects them before its next model call. A backend records each
	// steer it takes (Record, with the steer's MessageID) before acting on
	// it: the gateway counts a steer as consumed by this turn once it is
	// recorded, so a restart neither answers it again nor loses it.
	Steer <-chan Steer
	// Settings are the lane's choices (model, reasoning effort…).
	Settings Settings
	// History is the lane's conversation before this turn, oldest first.
	History []Msg
	// Record is called with each entry the turn adds to the conversation
	// (the person's message, the model's replies and tool results), so the
	// conversation survives restarts. It may be nil.
	Record func(Msg)
	// Cwd is the lane's working directory for tools.
	Cwd string
	// Asker reaches the person for approvals and questions; nil denies.
	Asker Asker
	// Todos is the lane's todo list as the turn starts.
	Todos []core.Todo
	// Cron manages scheduled jobs for the cronjob tool; nil: none.
	Cron Cron
}

// Steer is a text a person sends while a turn runs.
type Steer struct {
	Text string
	// MessageID is the person's message the steer is stored as.
	MessageID string
}

// Settings are per-lane choices a person makes with slash commands.
type Settings struct {
	Provider  string
	Model     string
	Reasoning string // "", none, minimal, low, medium, high
	Fast      bool
	Yolo      bool // no approvals for this session
}

// Msg is one entry of a lane's conversation with the model.
type Msg struct {
	Role       string // system | user | assistant | tool
	Content    string
	ToolCalls  []ToolCall `json:",omitempty"`
	ToolCallID string     `json:",omitempty"`
	MessageID  string     `json:",omitempty"` // the chat message it stands for, if any
	// Attachments are the files a person sent with a user message.
	Attachments []Attachment `json:",omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON
}

// Asker asks the person something on the agent's behalf and waits.
type Asker interface {
	// Approve asks whether a dangerous command may run: "once",
	// "session", "always" or "deny".
	Approve(ctx context.Context, command, description string) (string, error)
	// Clarify asks a question with up to four choices; the answer is a
	// choice or the person's own text.
	Clarify(ctx context.Context, question string, choices []string) (string, error)
}

// EventKind says what an Event reports.
type EventKind int

// Event kinds.
const (
	Text         EventKind = iota // a piece of the reply (Text)
	Reasoning                     // a piece of reasoning (Text)
	Commentary                    // text between tool rounds, complete (Text)
	ToolStart                     // Tool
	ToolProgress                  // Tool
	ToolEnd                       // Tool
	Todos                         // the full todo list (Todos)
	Usage                         // Tokens, Model, ContextPct, Cost, Cwd
	// TextIsCommentary says the text streamed since the last such event
	// was the model thinking aloud before tool calls, not its answer.
	TextIsCommentary
	// File offers a file to the devices (Path, Text as caption).
	File
	// TextIsReasoning says the text streamed since the last such event
	// (or TextIsCommentary) was the model's reasoning, not its reply (a
	// chat template opened the think block in the prompt): it moves to
	// the reasoning, and the reply starts over.
	TextIsReasoning
)

// Event is something a running turn reports.
type Event struct {
	Kind       EventKind
	Text       string
	Tool       *core.Tool
	Todos      []core.Todo
	Model      string
	Tokens     int
	ContextPct *int
	Cost       *float64
	Cwd        string
	Path       string
}

// Agent runs turns. Run blocks until the turn ends; it stops early, with
// ctx's error, when ctx is cancelled. Events are reported through emit, in
// order, from the goroutine that called Run.
type Agent interface {
	// Name labels the backend in replies (the message's model field falls
	// back to it) and in /status.
	Name() string
	Run(ctx context.Context, t Turn, emit func(Event)) error
}
