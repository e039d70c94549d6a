package slash

import "github.com/irisgate/irisgate/core"

// The slash commands' refusals: a command used the wrong way says how to
// use it.
var (
	ErrBusy           = core.NewKind("turn_running", core.CodeUnsupported, "wait for the running turn to end (or /stop it)")
	ErrNoLastMessage  = core.NewKind("no_last_message", core.CodeNotFound, "there is no message of yours to go back to")
	ErrNoApproval     = core.NewKind("approval_none_waiting", core.CodeNotFound, "no command is waiting for approval here")
	ErrNoModel        = core.NewKind("model_not_configured", core.CodeUnsupported, "no model is configured (the demo echo agent answers); set OPENAI_BASE_URL, OPENAI_API_KEY and IRISGATE_MODEL")
	ErrReasoningLevel = core.NewKind("reasoning_level_unknown", core.CodeUnsupported, "unknown level %q: use %s, show or hide")

	// Usage.
	ErrTitleUsage     = core.NewKind("title_usage", core.CodeUnsupported, "usage: /title <name>")
	ErrCronUsage      = core.NewKind("cron_usage", core.CodeUnsupported, "usage: /cron [list] | /cron add SCHEDULE | PROMPT | /cron pause|resume|rm|run ID")
	ErrApprovalsUsage = core.NewKind("approvals_usage", core.CodeUnsupported, "use /approvals ask, /approvals auto or /approvals yolo")
	ErrApproveUsage   = core.NewKind("approve_usage", core.CodeUnsupported, "use /approve, /approve session or /approve always")
	ErrStopUsage      = core.NewKind("stop_usage", core.CodeUnsupported, "use /stop (the running turn) or /stop all (and the queued messages)")
	ErrSteerUsage     = core.NewKind("steer_usage", core.CodeUnsupported, "usage: /steer <text>")
	ErrQueueUsage     = core.NewKind("queue_usage", core.CodeUnsupported, "usage: /queue <text>")
	ErrVoiceUsage     = core.NewKind("voice_usage", core.CodeUnsupported, "use /voice on or /voice off")
	ErrFastUsage      = core.NewKind("fast_usage", core.CodeUnsupported, "use /fast on or /fast off")
)
