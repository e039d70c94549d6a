package cron

import "github.com/irisgate/irisgate/core"

// The scheduler's errors, and those of naming a target lane (a job's, a
// delivery's).
var (
	ErrJobEmpty       = core.NewKind("cron_job_empty", core.CodeUnsupported, "a job needs a prompt or a text")
	ErrSchedule       = core.NewKind("cron_schedule_invalid", core.CodeUnsupported, "%v")
	ErrUnknownJob     = core.NewKind("cron_job_unknown", core.CodeNotFound, "no cron job %q")
	ErrUnknownAction  = core.NewKind("cron_action_unknown", core.CodeUnsupported, "unknown action %q on a job: use pause, resume, rm or run")
	ErrResume         = core.NewKind("cron_resume_failed", core.CodeUnsupported, "cannot resume %s: %v")
	ErrUnknownChannel = core.NewKind("target_channel_unknown", core.CodeNotFound, "unknown channel %q: give a chat_id from the channel list")
	ErrUnknownThread  = core.NewKind("target_thread_unknown", core.CodeNotFound, "unknown thread %q in channel %q")
	ErrTargetIsThread = core.NewKind("target_is_thread", core.CodeNotFound,
		"%q is a thread, not a channel: name its channel %q as the chat and it as the thread")
	ErrAmbiguousName = core.NewKind("target_channel_ambiguous", core.CodeNotFound, "%d channels are called %q: give the chat_id of one")
)
