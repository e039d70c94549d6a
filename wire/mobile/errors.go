package mobile

import (
	"errors"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/proto/mobilev1"
	"github.com/irisgate/irisgate/wire"
)

// The dialect's own errors. A malformed frame is the protocol's
// (mobilev1.Error, with its code); these are what the gateway refuses of
// a well-formed one.
var (
	ErrNotHello      = core.NewKind("mobile_hello_expected", core.CodeUnsupported, "the first frame must be hello, not %q")
	ErrHelloAgain    = core.NewKind("mobile_hello_again", core.CodeUnsupported, "already said hello on this connection")
	ErrBinaryFrame   = core.NewKind("mobile_binary_frame", core.CodeUnsupported, "binary frames are not part of the protocol: send JSON text frames")
	ErrFrameTooLarge = core.NewKind("mobile_frame_too_large", core.CodeMediaTooLarge, "frame larger than %d bytes")
	ErrRevoked       = core.NewKind("mobile_token_revoked", core.CodeAuth, "this token was revoked")
	ErrServiceFrame  = core.NewKind("mobile_service_frame", core.CodeForbidden,
		"a delivery token opens a service connection, which may send deliver and ping only, not %s")

	ErrDeliverForbidden = core.NewKind("deliver_forbidden", core.CodeForbidden,
		"deliver is accepted only from cron: a connection with a delivery token, or one over the gateway's admin socket")
	ErrNoTarget  = core.NewKind("deliver_no_target", core.CodeUnsupported, "deliver names no target and no home device is configured")
	ErrOffline   = core.NewKind("device_offline", core.CodeNotFound, "device %q is not online")
	ErrNotTaken  = core.NewKind("device_did_not_take", core.CodeNotFound, "device %q did not take the file: %v")
	ErrOtherCard = core.NewKind("card_other_device", core.CodeForbidden, "this card was shown to another device")
	ErrNoFiles   = core.NewKind("mobile_no_files", core.CodeUnsupported, "this gateway keeps no files (ready announced no media)")

	ErrUploads      = core.NewKind("mobile_uploads_full", core.CodeMediaTooLarge, "%d unfinished multi-part uploads already: finish one first")
	ErrTokenUploads = core.NewKind("mobile_token_uploads_full", core.CodeMediaTooLarge,
		"the devices of this token have %d unfinished multi-part uploads: finish some first")
	ErrPartsChanged = core.NewKind("mobile_parts_changed", core.CodeUnsupported, "parts changed from %d to %d within one file: the upload is dropped")
	ErrFileTooLarge = core.NewKind("mobile_file_too_large", core.CodeMediaTooLarge, "the file is larger than %d bytes: compress it")
	ErrUploadBuffer = core.NewKind("mobile_upload_buffer_full", core.CodeMediaTooLarge, "this device's unfinished uploads would exceed %d bytes: finish one first")
	ErrTokenBuffer  = core.NewKind("mobile_token_buffer_full", core.CodeMediaTooLarge,
		"the unfinished uploads of this token's devices would exceed %d bytes: finish some first")
)

// codes is how a core error reads in Hermes Mobile, by its code: the one
// table, for the hello and every frame after it.
var codes = map[core.Code]string{
	core.CodeAuth:          mobilev1.CodeAuthFailed,
	core.CodeForbidden:     mobilev1.CodeForbidden,
	core.CodeMediaTooLarge: mobilev1.CodeTooBig,
	core.CodeInternal:      mobilev1.CodeInternal,
	core.CodeUnsupported:   mobilev1.CodeBadFrame,
	core.CodeNotFound:      mobilev1.CodeBadFrame, // the protocol has no not_found: what the frame named is wrong
	core.CodeRateLimited:   mobilev1.CodeBadFrame, // a bound (a full lane queue), not an auth failure
}

// kindCodes are the kinds whose Hermes Mobile code is not their core
// code's: the protocol has codes of its own for them.
var kindCodes = map[*core.Kind]string{
	wire.ErrHelloTimeout: mobilev1.CodeAuthRequired,
	wire.ErrHelloEvicted: mobilev1.CodeAuthRequired,
	ErrOffline:           mobilev1.CodeDeviceOffline,
	ErrNotTaken:          mobilev1.CodeDeviceOffline,
	ErrNoFiles:           mobilev1.CodeUnsupportedFrame,
}

// fromCore is the one mapping of an error to this dialect's: the
// protocol's own errors as they are, a core error by kindCodes, then
// codes.
func fromCore(err error) *mobilev1.Error {
	var me *mobilev1.Error
	if errors.As(err, &me) {
		return &mobilev1.Error{Code: me.Code, Message: me.Message}
	}
	e := core.AsError(err)
	code, ok := kindCodes[e.Kind]
	if !ok {
		code, ok = codes[e.Code]
	}
	if !ok {
		// A code added to core but not to codes: TestMobileCodes fails
		// first; a client is still told something it can show.
		code = mobilev1.CodeInternal
	}
	return &mobilev1.Error{Code: code, Message: e.Message}
}
