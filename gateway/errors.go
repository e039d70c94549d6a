package gateway

import (
	"errors"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/store"
)

// The gateway's errors: what its commands refuse, and why.
var (
	// ErrShuttingDown refuses new turns during shutdown (the turn
	// runner's).
	ErrShuttingDown = turn.ErrShuttingDown

	// Lanes and messages.
	ErrUnknownChat      = core.NewKind("chat_unknown", core.CodeNotFound, "unknown chat_id %s")
	ErrChatIsThread     = core.NewKind("chat_is_thread", core.CodeNotFound, "chat_id %q is a thread: use its parent as chat_id and it as thread_id")
	ErrUnknownThread    = core.NewKind("thread_unknown", core.CodeNotFound, "unknown thread_id %q in chat %q")
	ErrAutomationSend   = core.NewKind("automation_channel_send", core.CodeUnsupported, "%q is an automation channel: it only receives gateway output")
	ErrTextTooLong      = core.NewKind("text_too_long", core.CodeUnsupported, "text is %d bytes, the limit is %d")
	ErrTextNotUTF8      = core.NewKind("text_not_utf8", core.CodeUnsupported, "text is not valid UTF-8")
	ErrEmptyMessage     = core.NewKind("message_empty", core.CodeUnsupported, "empty message: send text or media_refs")
	ErrEmptySteer       = core.NewKind("steer_empty", core.CodeUnsupported, "empty steer text")
	ErrNoMessageIDs     = core.NewKind("message_ids_empty", core.CodeUnsupported, "message_ids is empty")
	ErrTooManyIDs       = core.NewKind("message_ids_too_many", core.CodeUnsupported, "at most %d message_ids at once")
	ErrReceiptNoID      = core.NewKind("read_receipt_no_id", core.CodeUnsupported, "read.receipt needs a message_id")
	ErrMessageIDTooLong = core.NewKind("message_id_too_long", core.CodeUnsupported, "message_id is longer than %d bytes")
	ErrReceiptUnknown   = core.NewKind("read_receipt_unknown", core.CodeNotFound, "no message %s in this chat")
	ErrUnknownBefore    = core.NewKind("before_message_unknown", core.CodeNotFound, "unknown before_message_id %s")
	ErrSearchScope      = core.NewKind("search_scope_invalid", core.CodeUnsupported, "scope must be \"all\" or \"chat\", not %s")
	ErrWebPush          = core.NewKind("webpush_invalid", core.CodeUnsupported, "webpush must be a PushSubscription with an https endpoint and keys")
	// ErrQueueFull refuses a message into a lane whose queue is full (the
	// turn runner's).
	ErrQueueFull = turn.ErrQueueFull

	// Push addresses a device registers (push's validation says why).
	ErrFCMToken  = core.NewKind("push_fcm_token_invalid", core.CodeUnsupported, "%v; push through FCM stays off for this device")
	ErrNtfyTopic = core.NewKind("push_ntfy_topic_invalid", core.CodeUnsupported, "%v; push through ntfy stays off for this device")
	// ErrPushRefused tells a device, connected all the same, which of its
	// hello's push addresses were not kept: the refusals above, joined.
	ErrPushRefused = core.NewKind("push_addresses_refused", core.CodeUnsupported, "%s")

	// The channel directory.
	ErrChannelParent   = core.NewKind("channel_parent_given", core.CodeUnsupported, "a channel has no parent_chat_id; use kind \"thread\"")
	ErrUnknownParent   = core.NewKind("parent_unknown", core.CodeNotFound, "unknown parent_chat_id %s")
	ErrNestedThread    = core.NewKind("thread_nested", core.CodeUnsupported, "threads cannot be nested: %q is a thread")
	ErrChannelKind     = core.NewKind("channel_kind_invalid", core.CodeUnsupported, "kind must be \"channel\" or \"thread\", not %q")
	ErrColor           = core.NewKind("channel_color_invalid", core.CodeUnsupported, "color must be #RRGGBB, not %q")
	ErrIconsTooLarge   = core.NewKind("channel_icons_too_large", core.CodeMediaTooLarge, "the channels' icons together would be %d KiB, the limit is %d KiB: use smaller icons")
	ErrIconTooLarge    = core.NewKind("channel_icon_too_large", core.CodeMediaTooLarge, "icon is larger than %d KiB")
	ErrIconBase64      = core.NewKind("channel_icon_base64", core.CodeUnsupported, "icon is not valid base64: %v")
	ErrIconType        = core.NewKind("channel_icon_type", core.CodeUnsupported, "icon must be a PNG or JPEG image")
	ErrNameEmpty       = core.NewKind("channel_name_empty", core.CodeUnsupported, "name is empty")
	ErrNameNotUTF8     = core.NewKind("channel_name_not_utf8", core.CodeUnsupported, "name is not valid UTF-8")
	ErrNameTooLong     = core.NewKind("channel_name_too_long", core.CodeUnsupported, "name is longer than %d characters")
	ErrNameControl     = core.NewKind("channel_name_control", core.CodeUnsupported, "name contains control characters")
	ErrDeleteDefault   = core.NewKind("default_channel_delete", core.CodeUnsupported, "the default channel cannot be deleted")
	ErrThreadDefault   = core.NewKind("thread_default", core.CodeUnsupported, "a thread cannot be the default channel")
	ErrThreadAutomate  = core.NewKind("thread_automation", core.CodeUnsupported, "a thread cannot be an automation channel; mark its channel")
	ErrAutomateDefault = core.NewKind("automation_default", core.CodeUnsupported, "an automation channel cannot be the default channel")
	// ErrDefaultAutomate has been not_found since it was written; Iris's
	// devices see that code, so it stays.
	ErrDefaultAutomate = core.NewKind("default_automation", core.CodeNotFound, "the default channel cannot be an automation channel")

	// Media.
	ErrNoMedia      = core.NewKind("media_off", core.CodeUnsupported, "this gateway takes no media")
	ErrUploadNoConn = core.NewKind("upload_no_connection", core.CodeUnsupported, "uploads need a connection")
	ErrFilesNoConn  = core.NewKind("files_no_connection", core.CodeUnsupported, "files need a connection")
	ErrUnknownMedia = core.NewKind("media_unknown", core.CodeNotFound, "unknown media_id %s")
	ErrTooManyRefs  = core.NewKind("media_refs_too_many", core.CodeUnsupported, "at most %d media_refs in one message")
	ErrUnknownRef   = core.NewKind("media_ref_unknown", core.CodeNotFound, "unknown media_ref %s: not an acknowledged upload of this device (or it expired)")
	ErrRefGone      = core.NewKind("media_ref_gone", core.CodeNotFound, "unknown media_ref %s: it expired or was used meanwhile")
	ErrTooManyFiles = core.NewKind("delivery_files_too_many", core.CodeUnsupported, "at most %d files in one delivery")
	ErrNoFile       = core.NewKind("delivery_no_file", core.CodeUnsupported, "a file delivery needs a file")
	ErrDeliveryText = core.NewKind("delivery_text_empty", core.CodeUnsupported, "a delivery needs non-empty UTF-8 text")
	ErrLaneIsThread = core.NewKind("lane_chat_is_thread", core.CodeUnsupported, "chat_id %s is a thread")

	// Tokens and devices (Auth).
	ErrReservedDevice = core.NewKind("device_id_reserved", core.CodeAuth, "device ids beginning with %q belong to Hermes Mobile devices: choose another device_id")
	ErrNoToken        = core.NewKind("token_missing", core.CodeAuth, "hello carries no token")
	ErrBadToken       = core.NewKind("token_invalid", core.CodeAuth, "invalid token")
	ErrTokenBound     = core.NewKind("token_bound_elsewhere", core.CodeForbidden, "this token is bound to another device")
	ErrDeviceBound    = core.NewKind("device_bound_elsewhere", core.CodeForbidden, "device %s is bound to another token")
	ErrBinding        = core.NewKind("binding_invalid", core.CodeUnsupported, "a device id is at most %d bytes of UTF-8 without spaces or control characters")
	ErrBindingPrefix  = core.NewKind("binding_prefix_only", core.CodeUnsupported, "name the device after %q")
	ErrServiceDevice  = core.NewKind("device_id_service", core.CodeAuth, "device ids beginning with %q belong to delivery services: choose another device_id")
	ErrDeviceID       = core.NewKind("device_id_invalid", core.CodeUnsupported, "device_id must be at most %d bytes of UTF-8 without spaces or control characters")
	ErrHellosHeld     = core.NewKind("hellos_held", core.CodeRateLimited, "too many failed hellos from this address are waiting for their answer: try again later")

	// What clients can make the core hold (Bounds, bounds.go; the turns'
	// bounds are the turn runner's).
	ErrTokenTurns    = turn.ErrTokenTurns
	ErrAllTurns      = turn.ErrAllTurns
	ErrDirectoryFull = core.NewKind("channel_directory_full", core.CodeRateLimited, "the channel directory is full (%d channels and threads): delete some first")
	ErrAutoThreads   = core.NewKind("auto_threads_too_many", core.CodeRateLimited, "more than %d new threads a minute: send into an existing thread, or wait a moment")
	ErrTokenConns    = core.NewKind("connections_of_token_full", core.CodeRateLimited, "%d connections of this token are open, as many as it may have: close one first")
)

// notFound is k's error when the store found nothing, and err (a failure
// of the store) otherwise.
func notFound(err error, k *core.Kind, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return k.New(args...)
	}
	return err
}
