package media

import (
	"context"
	"strings"
	"sync"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// An upload is media.upload.start, binary frames, media.upload.end. The
// binary frames of a connection go to the upload it started last: its open
// upload. Starting another leaves the earlier one unfinished; it can still
// be ended if all its bytes came. Limits hold as bytes arrive: a frame
// that would pass the declared size fails the upload at once, its partial
// file removed, and the rest of its frames are dropped unread.

// upload is one upload between its start and its end.
type upload struct {
	ref   string
	reqID int64 // the start's request id: errors while bytes arrive carry it
	dev   *devUploads
	tok   *devUploads // the same, counted for the device's token
	meta  core.Media

	mu  sync.Mutex // the connection's read loop against a Drop
	tmp *temp      // nil once failed or dropped
	err *core.Error

	// Guarded by Store.mu.
	counts bool // still counted against the device's limits
	failed bool // kept only to answer its end
}

// connUploads is what one connection has started.
type connUploads struct {
	open  *upload
	byRef map[string]*upload
}

// devUploads counts a device's unfinished uploads over its connections
// (or, in Store.toks, a token's over its devices).
type devUploads struct {
	id    string
	n     int
	bytes int64
}

// maxFailed bounds the failed uploads a connection keeps to answer their
// media.upload.end with the reason.
const maxFailed = 16

// Start begins an upload for device dev (which came with token tok) on
// connection conn, of what the device declared (checked and completed by
// Describe). A ref the
// connection is uploading already starts over. When a start is refused,
// the binary frames sent after it are dropped without a word until the
// next start: the device was told, and they must not land in the upload
// that was open before.
func (s *Store) Start(conn uint64, dev, tok string, reqID int64, ref, kind, mimeType, filename string, size *int64) error {
	m, err := Describe(ref, kind, mimeType, filename, size)
	if err == nil && m.Size > s.lim.MaxSize {
		err = ErrUploadTooLarge.New(m.Filename, m.Size, s.lim.MaxSize)
	}
	var old *upload
	s.mu.Lock()
	if err == nil {
		old, err = s.startLocked(conn, dev, tok, reqID, ref, m)
	}
	if err != nil {
		s.connLocked(conn).open = refused
	}
	s.mu.Unlock()
	// The replaced upload's partial file goes once s.mu is released: the
	// lock order is an upload's lock before s.mu.
	if old != nil {
		old.abandon()
	}
	return err
}

// refused is the open upload after a refused start: it takes no bytes.
var refused = &upload{failed: true}

func (s *Store) connLocked(conn uint64) *connUploads {
	c := s.conns[conn]
	if c == nil {
		c = &connUploads{byRef: map[string]*upload{}}
		s.conns[conn] = c
	}
	return c
}

func (s *Store) startLocked(conn uint64, dev, tok string, reqID int64, ref string, m core.Media) (old *upload, err error) {
	c := s.connLocked(conn)
	if old = c.byRef[ref]; old != nil {
		s.forgetLocked(c, old)
	}
	d := s.devs[dev]
	if d == nil {
		d = &devUploads{id: dev}
	}
	if d.n >= s.lim.MaxPending {
		return old, ErrDeviceUploads.New(d.n)
	}
	if d.bytes+m.Size > s.lim.MaxPendingBytes {
		return old, ErrDeviceUploadBytes.New(d.bytes+m.Size, s.lim.MaxPendingBytes)
	}
	td := s.toks[tok]
	if td == nil {
		td = &devUploads{id: tok}
	}
	if k := s.lim.TokenDevices; td.n >= k*s.lim.MaxPending || td.bytes+m.Size > int64(k)*s.lim.MaxPendingBytes {
		return old, ErrTokenUploads.New(td.n, td.bytes, k)
	}
	t, err := s.newTemp()
	if err != nil {
		return old, err
	}
	if len(c.byRef) >= maxFailed+s.lim.MaxPending {
		for r, u := range c.byRef {
			if u.failed {
				delete(c.byRef, r)
			}
		}
	}
	s.devs[dev] = d
	d.n++
	d.bytes += m.Size
	s.toks[tok] = td
	td.n++
	td.bytes += m.Size
	u := &upload{ref: ref, reqID: reqID, dev: d, tok: td, meta: m, tmp: t, counts: true}
	c.byRef[ref] = u
	c.open = u
	return old, nil
}

// Write appends a binary frame to the connection's open upload. An error
// is the upload's failure (or a frame outside any upload) and reqID the
// request it answers; frames of an upload that failed already are dropped
// without a word, the device was told.
func (s *Store) Write(conn uint64, data []byte) (reqID int64, err error) {
	s.mu.Lock()
	var u *upload
	if c := s.conns[conn]; c != nil {
		u = c.open
	}
	s.mu.Unlock()
	if u == nil {
		return 0, ErrNoOpenUpload.New()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tmp == nil {
		return 0, nil
	}
	if u.tmp.n+int64(len(data)) > u.meta.Size {
		return u.reqID, s.fail(u, ErrUploadOverrun.New(u.ref, u.meta.Size))
	}
	if _, err := u.tmp.Write(data); err != nil {
		s.log.Error("media: writing an upload", "ref", u.ref, "err", err)
		return u.reqID, s.fail(u, ErrUploadStore.Wrap(err, u.ref))
	}
	return 0, nil
}

// fail ends an upload that broke as its bytes arrived: nothing of it stays
// but the reason, for its end. u.mu is held.
func (s *Store) fail(u *upload, e *core.Error) *core.Error {
	u.tmp.discard()
	u.tmp = nil
	u.err = e
	s.mu.Lock()
	u.failed = true
	s.releaseLocked(u)
	s.mu.Unlock()
	return e
}

// End finishes an upload: all declared bytes must have come and hash to
// sum. The file then joins the content store and the upload is recorded
// as the device's, for a message.send to attach. It returns what was
// stored.
func (s *Store) End(ctx context.Context, conn uint64, dev, ref, sum string) (core.Media, error) {
	s.mu.Lock()
	var u *upload
	c := s.conns[conn]
	if c != nil {
		u = c.byRef[ref]
	}
	if u != nil {
		s.forgetLocked(c, u)
	}
	s.mu.Unlock()
	if u == nil {
		return core.Media{}, ErrUnknownUpload.New(ref)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err != nil {
		return core.Media{}, u.err
	}
	t := u.tmp
	u.tmp = nil
	s.mu.Lock()
	s.releaseLocked(u)
	s.mu.Unlock()
	if t.n != u.meta.Size {
		t.discard()
		return core.Media{}, ErrUploadIncomplete.New(ref, t.n, u.meta.Size)
	}
	sum = strings.ToLower(strings.TrimSpace(sum))
	if !isSHA256(sum) {
		t.discard()
		return core.Media{}, ErrBadSHA256.New(ref)
	}
	if got := t.sum(); got != sum {
		t.discard()
		return core.Media{}, ErrSHA256Mismatch.New(ref, t.n, got)
	}
	m := u.meta
	m.SHA256 = sum
	err := s.install(ctx, t, func(sha string) error {
		return s.st.Write(ctx, func(tx store.Tx) error {
			if err := tx.PutBlob(sha, m.Size); err != nil {
				return err
			}
			return tx.PutUpload(dev, ref, m)
		})
	})
	return m, err
}

// Drop abandons every upload of a connection that ended: their partial
// files are removed.
func (s *Store) Drop(conn uint64) {
	s.mu.Lock()
	c := s.conns[conn]
	delete(s.conns, conn)
	var us []*upload
	if c != nil {
		for _, u := range c.byRef {
			s.releaseLocked(u)
			us = append(us, u)
		}
	}
	s.mu.Unlock()
	for _, u := range us {
		u.abandon()
	}
}

// Pending is how many unfinished uploads the device has, and their bytes.
func (s *Store) Pending(dev string) (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.devs[dev]; d != nil {
		return d.n, d.bytes
	}
	return 0, 0
}

// abandon removes the upload's partial file.
func (u *upload) abandon() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tmp != nil {
		u.tmp.discard()
		u.tmp = nil
	}
}

// forgetLocked removes u from its connection's uploads and from the
// device's counts. s.mu is held.
func (s *Store) forgetLocked(c *connUploads, u *upload) {
	delete(c.byRef, u.ref)
	if c.open == u {
		c.open = nil
	}
	s.releaseLocked(u)
}

// releaseLocked stops counting u against its device. s.mu is held.
func (s *Store) releaseLocked(u *upload) {
	if !u.counts {
		return
	}
	u.counts = false
	d := u.dev
	d.n--
	d.bytes -= u.meta.Size
	if d.n == 0 && s.devs[d.id] == d {
		delete(s.devs, d.id)
	}
	td := u.tok
	td.n--
	td.bytes -= u.meta.Size
	if td.n == 0 && s.toks[td.id] == td {
		delete(s.toks, td.id)
	}
}
