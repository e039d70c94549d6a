// Package slash is the gateway's slash commands: the catalog devices
// complete against, the parsing of "/cmd args" typed in a lane, and what
// each command does, through an Env the gateway implements. A command
// never reaches the store, the hub or the turn runner itself: what it
// changes goes through Env, whose methods are the gateway's own paths
// (commit, then publish).
package slash

import (
	"context"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store/record"
)

// Env is what the commands act on.
type Env interface {
	// SystemMessage posts a message of the gateway into the lane.
	SystemMessage(ctx context.Context, lk core.Lane, text string)
	// Reply posts a system message whose copy to `to` answers its request
	// (a picker.select).
	Reply(ctx context.Context, lk core.Lane, to hub.Caller, text string)

	// Busy reports whether a turn runs (its agent.idle not yet out) or
	// waits in the lane.
	Busy(lk core.Lane) bool
	// LaneStatus says whether a turn runs and how many wait.
	LaneStatus(lk core.Lane) (running bool, queued int)
	// Stop stops the running turn; from gets its agent.idle.
	Stop(ctx context.Context, from hub.Caller, lk core.Lane) error
	// DropQueued forgets the turns waiting (not the running one) and
	// returns how many were people's.
	DropQueued(ctx context.Context, lk core.Lane) (int, error)
	// Steer hands text to the running turn (sends it when none runs).
	Steer(ctx context.Context, from hub.Caller, lk core.Lane, text string) error
	// Send sends text as the person's message, queued for a turn.
	Send(ctx context.Context, from hub.Caller, lk core.Lane, text string) error

	// ConversationLen counts the conversation's entries without decoding
	// them, so it works on a damaged one.
	ConversationLen(ctx context.Context, lk core.Lane) (int, error)
	// History returns the lane's newest messages (at most limit), oldest
	// first.
	History(ctx context.Context, lk core.Lane, limit int) ([]core.Message, error)
	// ClearSession starts the lane afresh: conversation, session
	// approvals, /yolo and todo list.
	ClearSession(ctx context.Context, lk core.Lane) error
	// Undo removes the person's message user and the messages after it,
	// from history and from the conversation.
	Undo(ctx context.Context, lk core.Lane, user core.Message, after []string) error
	// Retry removes the messages after user and answers user again.
	Retry(ctx context.Context, from hub.Caller, user core.Message, after []string) error
	// Rename renames the lane's channel (its thread, in a thread).
	Rename(ctx context.Context, lk core.Lane, name string) error

	// Settings are the lane's stored choices (the defaults when they
	// cannot be read); SaveSettings replaces them.
	Settings(ctx context.Context, lk core.Lane) record.LaneSettings
	SaveSettings(ctx context.Context, lk core.Lane, s record.LaneSettings) error
	// AgentSettings is what a turn of the lane would hand the agent.
	AgentSettings(lk core.Lane, s record.LaneSettings) agent.Settings
	// ShowReasoning says whether replies show their reasoning.
	ShowReasoning(s record.LaneSettings) bool
	// ToggleYolo flips the session's /yolo and returns it; SetYolo sets it.
	ToggleYolo(lk core.Lane) bool
	SetYolo(lk core.Lane, on bool)

	// OpenPicker shows p on every device; onSelect runs the choice.
	OpenPicker(ctx context.Context, lk core.Lane, p core.Picker, onSelect func(ctx context.Context, to hub.Caller, value string) error) error
	// PendingApproval is the id of the lane's open approval picker, "".
	PendingApproval(lk core.Lane) string
	// SelectPicker answers a picker as a device's picker.select would.
	SelectPicker(ctx context.Context, from hub.Caller, id, value string) error

	// Agent is the backend the lane's turns run on.
	Agent() agent.Agent
	// Workdir is where tools run, as the person would write it (~/…).
	Workdir() string
	// Speaks says whether a text-to-speech endpoint is configured.
	Speaks() bool
	// Cron is the scheduled jobs, as the agent's cronjob tool sees them.
	Cron() agent.Cron
}
