package mobile

// Files a device sends: voice messages and media, whole or in parts,
// kept in the media store and handed to the agent as a message.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/proto/mobilev1"
)

// audio hands a voice message to the agent: the recording is kept in the
// media store and attached to a message whose text is the device's
// transcript, when it sent one. The agent gets the file's path (and the
// transcript), Iris devices a message they can pull the recording of.
func (s *Session) audio(ctx context.Context, a mobilev1.Audio) error {
	data, e := mobilev1.DecodeB64("data", a.Data)
	if e != nil {
		return e
	}
	return s.handOff(ctx, "voice", "audio/"+a.Format, "voice."+a.Format, a.Text, bytes.NewReader(data))
}

// upload is a multi-part media file being assembled.
type upload struct {
	kind, mime, filename, caption string
	parts                         [][]byte // by part index; nil: not yet
	got                           int
	size                          int
}

// media takes one chunk of a file. Limits are checked before anything is
// allocated; a chunk that breaks one drops its upload. A file the window
// has seen whole is a duplicate, whatever chunk of it comes.
func (s *Session) media(ctx context.Context, id string, m mobilev1.MediaChunk) error {
	k := s.key(id)
	if s.d.dedupe.seen(k) {
		return nil
	}
	if m.Parts == 1 {
		return s.once(id, func() error {
			data, e := mobilev1.DecodeB64("data", m.Data)
			if e != nil {
				return e
			}
			return s.handOff(ctx, m.Kind, m.Mime, m.Filename, m.Caption, bytes.NewReader(data))
		})
	}
	u := s.uploads[id]
	if u == nil {
		if len(s.uploads) >= mobilev1.MaxUploads {
			return ErrUploads.New(mobilev1.MaxUploads)
		}
		if s.d.tokenUploads(s.conn.Token).n >= TokenDevices*mobilev1.MaxUploads {
			return ErrTokenUploads.New(TokenDevices * mobilev1.MaxUploads)
		}
	} else if len(u.parts) != m.Parts {
		s.drop(id)
		return ErrPartsChanged.New(len(u.parts), m.Parts)
	} else if u.parts[m.Part] != nil {
		return nil // a chunk sent twice
	}
	have := 0
	if u != nil {
		have = u.size
	}
	if have+m.Size > mobilev1.MaxMediaBytes {
		s.drop(id)
		return ErrFileTooLarge.New(mobilev1.MaxMediaBytes)
	}
	if s.buffered+m.Size > mobilev1.MaxUploadBuffer {
		s.drop(id)
		return ErrUploadBuffer.New(mobilev1.MaxUploadBuffer)
	}
	if s.d.tokenUploads(s.conn.Token).bytes+m.Size > TokenDevices*mobilev1.MaxUploadBuffer {
		s.drop(id)
		return ErrTokenBuffer.New(TokenDevices * mobilev1.MaxUploadBuffer)
	}
	data, e := mobilev1.DecodeB64("data", m.Data)
	if e != nil {
		s.drop(id)
		return e
	}
	if u == nil {
		u = &upload{kind: m.Kind, parts: make([][]byte, m.Parts)}
		s.uploads[id] = u
		s.d.countUpload(s.conn.Token, 1, 0)
	}
	if u.mime == "" {
		u.mime = m.Mime
	}
	if u.filename == "" {
		u.filename = m.Filename
	}
	if u.caption == "" {
		u.caption = m.Caption
	}
	u.parts[m.Part] = data
	u.got++
	u.size += len(data)
	s.buffered += len(data)
	s.d.countUpload(s.conn.Token, 0, len(data))
	if u.got < len(u.parts) {
		return nil
	}
	// Assembled: every part is here, in order.
	s.drop(id)
	return s.once(id, func() error {
		parts := make([]io.Reader, len(u.parts))
		for i, p := range u.parts {
			parts[i] = bytes.NewReader(p)
		}
		return s.handOff(ctx, u.kind, u.mime, u.filename, u.caption, io.MultiReader(parts...))
	})
}

// drop frees an unfinished upload.
func (s *Session) drop(id string) {
	if u := s.uploads[id]; u != nil {
		s.buffered -= u.size
		delete(s.uploads, id)
		s.d.countUpload(s.conn.Token, -1, -u.size)
	}
}

// tokenUploads is a copy of what tok's connections hold now.
func (d *Dialect) tokenUploads(tok string) tokenUploads {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.uploads[tok]; t != nil {
		return *t
	}
	return tokenUploads{}
}

// countUpload adds n uploads and size bytes to tok's count.
func (d *Dialect) countUpload(tok string, n, size int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.uploads[tok]
	if t == nil {
		t = &tokenUploads{}
		d.uploads[tok] = t
	}
	t.n += n
	t.bytes += size
	if t.n <= 0 {
		delete(d.uploads, tok)
	}
}

// handOff keeps a whole file the device sent in the media store and sends
// the message that carries it into the device's lane, the caption (for
// audio, the transcript) as its text: the same path an Iris message.send
// with media_refs takes, so the agent gets the file and Iris devices see
// the message with media they can pull.
func (s *Session) handOff(ctx context.Context, kind, mimeType, filename, caption string, data io.Reader) error {
	if !s.d.cfg.GW.TakesMedia() {
		return ErrNoFiles.New()
	}
	if mt, _, err := mime.ParseMediaType(mimeType); err != nil || !strings.Contains(mt, "/") {
		mimeType = "" // the store derives it from the file name or the bytes
	}
	if filename == "" {
		filename = nameFor(kind, mimeType)
	}
	ref, err := s.d.cfg.GW.KeepFile(ctx, s.caller(), kind, mimeType, filename, data)
	if err != nil {
		return err
	}
	return s.send(ctx, gateway.SendRequest{Lane: s.lane, Text: strings.TrimSpace(caption), MediaRefs: []string{ref}})
}

// nameFor names a file its sender left unnamed: its kind, with the mime
// type's extension when there is one, so the receiver can open it.
func nameFor(kind, mimeType string) string {
	if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
		return kind + exts[0]
	}
	return kind
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
