package media

import "github.com/irisgate/irisgate/core"

// The media store's errors: uploads (media.upload.*), deliveries of files
// and the files the agent offers.
var (
	ErrNoRef        = core.NewKind("media_ref_missing", core.CodeUnsupported, "media_ref is required")
	ErrBadRef       = core.NewKind("media_ref_invalid", core.CodeUnsupported, "media_ref must be at most %d bytes of printable text")
	ErrNoSize       = core.NewKind("media_size_missing", core.CodeUnsupported, "size is required: the file's length in bytes")
	ErrNegativeSize = core.NewKind("media_size_negative", core.CodeUnsupported, "size must not be negative")
	ErrBadMime      = core.NewKind("media_mime_invalid", core.CodeUnsupported, "mime %q is not a media type (like image/jpeg)")
	ErrBadKind      = core.NewKind("media_kind_invalid", core.CodeUnsupported, "kind must be one of %s, not %q")

	ErrUploadTooLarge = core.NewKind("upload_too_large", core.CodeMediaTooLarge, "%q is %d bytes; the limit is %d")
	ErrDeviceUploads  = core.NewKind("device_uploads_full", core.CodeRateLimited,
		"this device has %d unfinished uploads, the limit: end one (media.upload.end) before starting another")
	ErrDeviceUploadBytes = core.NewKind("device_upload_bytes_full", core.CodeRateLimited,
		"this device's unfinished uploads would hold %d bytes; the limit is %d: end some first")
	ErrTokenUploads = core.NewKind("token_uploads_full", core.CodeRateLimited,
		"the devices of this token have %d unfinished uploads (%d bytes declared); the limit is %d devices' worth: end some first")
	ErrNoOpenUpload  = core.NewKind("binary_outside_upload", core.CodeUnsupported, "binary frame outside a media upload: send media.upload.start first")
	ErrUploadOverrun = core.NewKind("upload_overrun", core.CodeMediaTooLarge, "upload %q: more bytes than the declared size of %d")
	ErrUploadStore   = core.NewKind("upload_store_failed", core.CodeInternal, "upload %q: the gateway could not store its bytes")
	ErrUnknownUpload = core.NewKind("upload_unknown", core.CodeNotFound,
		"no upload %q on this connection (send media.upload.start first; uploads end with their connection)")
	ErrUploadIncomplete = core.NewKind("upload_incomplete", core.CodeUnsupported, "upload %q is incomplete: %d of %d bytes arrived")
	ErrBadSHA256        = core.NewKind("upload_sha256_invalid", core.CodeUnsupported, "upload %q: sha256 must be 64 hex digits")
	ErrSHA256Mismatch   = core.NewKind("upload_sha256_mismatch", core.CodeUnsupported, "upload %q: sha256 mismatch: the %d bytes received hash to %s")

	ErrFileTooLarge     = core.NewKind("file_too_large", core.CodeMediaTooLarge, "%q is larger than this gateway's limit of %d bytes")
	ErrDeliveryTooLarge = core.NewKind("delivery_files_too_large", core.CodeMediaTooLarge, "%q: the files of one delivery may hold %d bytes together")

	ErrNotRegular    = core.NewKind("file_not_regular", core.CodeUnsupported, "%s is not a regular file")
	ErrOfferTooLarge = core.NewKind("offered_file_too_large", core.CodeMediaTooLarge, "%s is %d bytes; the limit is %d")
	ErrOfferGrew     = core.NewKind("offered_file_grew", core.CodeMediaTooLarge, "%s grew past the limit of %d bytes")

	ErrGone = core.NewKind("media_file_gone", core.CodeNotFound, "the file of media_id %q is gone from the gateway")
)
