package server

import (
	"net/http"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/httperr"
)

// The HTTP API's errors (POST /api/send, GET /api/webpush, and the
// cross-origin rule and the bounds over every endpoint).
var (
	ErrCrossOrigin = core.NewKind("cross_origin_refused", core.CodeForbidden,
		"cross-origin request refused: only the gateway's own pages (and --allowed-origins) may send it")
	ErrDeliverToken = core.NewKind("delivery_token_required", core.CodeAuth,
		"a delivery token is required (--deliver-tokens, sent as Authorization: Bearer …); on the gateway's own machine irisgate send needs none")
	ErrSendBodyTooLarge = core.NewKind("send_body_too_large", core.CodeUnsupported,
		"the JSON body is larger than %d bytes (text may be %d): send more as a file, in a multipart/form-data body")
	ErrSendBody = core.NewKind("send_body_malformed", core.CodeUnsupported,
		"the body must be JSON {chat_id, thread_id?, text} or multipart/form-data with a file: %v")
	ErrMultipart      = core.NewKind("multipart_malformed", core.CodeUnsupported, "multipart body: %v")
	ErrLaneAfterFiles = core.NewKind("send_lane_after_files", core.CodeUnsupported, "%s must come before the file parts")
	ErrBodyBrokeOff   = core.NewKind("send_body_broke_off", core.CodeUnsupported, "the body broke off in %q: %v")
	ErrFieldTooLong   = core.NewKind("form_field_too_long", core.CodeUnsupported, "the field %s is longer than %d bytes")
	ErrNoWebPush      = core.NewKind("web_push_not_configured", core.CodeNotFound, "web push is not configured")
	// ErrTooManyRequests: Config.MaxRequestsPerAddr (httpBounds).
	ErrTooManyRequests = core.NewKind("too_many_requests", core.CodeRateLimited, "too many requests from this address are being served: try again")
)

// sendTypes are the bodies POST /api/send takes (ErrContentType's first
// argument).
const sendTypes = "application/json (text) or multipart/form-data (files)"

// writeError answers an HTTP API request with err (httperr: the status
// by its kind or code).
func writeError(w http.ResponseWriter, err error) { httperr.Write(w, err, false) }
