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
	Media []core.Media
	// Steer delivers texts a person sends while the turn runs; a backend
	// injects them before its next model call.
	Steer <-chan string
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
	Usage                         // Tokens, Model, ContextPct, Cost
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
