package core

// CursorRange is a closed range of outbox cursors, Lo through Hi: how the
// set of frames a device is proven to have is kept and stored.
type CursorRange struct {
	Lo, Hi int64
}
