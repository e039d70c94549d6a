package admin

import "github.com/irisgate/irisgate/core"

// The admin API's own errors (the cron and token rules' are their
// packages').
var (
	ErrMalformed    = core.NewKind("admin_request_malformed", core.CodeUnsupported, "malformed admin request: %v")
	ErrNoTokenRef   = core.NewKind("token_ref_missing", core.CodeUnsupported, "name the token: its id (tok_…) from irisgate token list, or the token itself")
	ErrUnknownToken = core.NewKind("token_id_unknown", core.CodeNotFound, "no token with id %s (irisgate token list shows them)")
	ErrTokenValue   = core.NewKind("token_value_unknown", core.CodeNotFound, "no stored token has this value: revoke by the tok_ id irisgate token list shows "+
		"(the fixed --token / IRISGATE_TOKEN and delivery tokens are not stored: change them in the configuration)")
	// ErrTokenGone is a token revoked by someone else between the lookup
	// and the revocation.
	ErrTokenGone = core.NewKind("token_gone", core.CodeNotFound, "no token with id %s")
)
