package media

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
)

// Kinds of media, as the protocol names them.
var Kinds = []string{"image", "audio", "video", "document", "voice"}

// Limits of what a device declares.
const (
	MaxRefBytes      = 128
	MaxFilenameBytes = 255
	maxMimeBytes     = 127
)

// Describe checks what a device declares in media.upload.start and fills
// what it left out: the kind from the mime type, the mime type from the
// file name, the file name from the ref. size must be given.
func Describe(ref, kind, mimeType, filename string, size *int64) (core.Media, error) {
	if ref == "" {
		return core.Media{}, ErrNoRef.New()
	}
	if len(ref) > MaxRefBytes || !utf8.ValidString(ref) || strings.IndexFunc(ref, unicode.IsControl) >= 0 {
		return core.Media{}, ErrBadRef.New(MaxRefBytes)
	}
	if size == nil {
		return core.Media{}, ErrNoSize.New()
	}
	if *size < 0 {
		return core.Media{}, ErrNegativeSize.New()
	}
	m := core.Media{Size: *size, Filename: CleanName(filename)}
	if m.Filename == "" {
		m.Filename = CleanName(ref)
	}
	if m.Filename == "" {
		m.Filename = "file"
	}
	if mimeType != "" {
		mt, _, err := mime.ParseMediaType(mimeType)
		if err != nil || len(mt) > maxMimeBytes || !strings.Contains(mt, "/") {
			return core.Media{}, ErrBadMime.New(quoteCut(mimeType))
		}
		m.Mime = mt
	} else {
		m.Mime = byExtension(m.Filename)
	}
	switch {
	case kind == "":
		m.Kind = KindOf(m.Mime)
	case isKind(kind):
		m.Kind = kind
	default:
		return core.Media{}, ErrBadKind.New(strings.Join(Kinds, ", "), quoteCut(kind))
	}
	return m, nil
}

func isKind(k string) bool {
	for _, x := range Kinds {
		if k == x {
			return true
		}
	}
	return false
}

// KindOf is the kind a mime type stands for; voice is only ever declared.
func KindOf(mimeType string) string {
	switch {
	case strings.HasPrefix(mimeType, "image/"):
		return "image"
	case strings.HasPrefix(mimeType, "audio/"):
		return "audio"
	case strings.HasPrefix(mimeType, "video/"):
		return "video"
	}
	return "document"
}

func byExtension(name string) string {
	if t := mime.TypeByExtension(strings.ToLower(filepath.Ext(name))); t != "" {
		if mt, _, err := mime.ParseMediaType(t); err == nil {
			return mt
		}
	}
	return "application/octet-stream"
}

// CleanName makes a file name safe to show and to save on a device: the
// last element of any path, without control characters, at most
// MaxFilenameBytes, never "." or "..".
func CleanName(name string) string {
	name = strings.ToValidUTF8(name, "")
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	for len(name) > MaxFilenameBytes {
		_, n := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-n]
	}
	if strings.Trim(name, ".") == "" {
		return ""
	}
	return name
}

func quoteCut(s string) string {
	if len(s) > 64 {
		for i := 64; i > 0; i-- {
			if utf8.RuneStart(s[i]) {
				return s[:i] + "…"
			}
		}
	}
	return s
}

// Ingest copies a file of the agent's into the store and runs record (in
// which the caller commits the rows that use it) with what was stored:
// the file name, its sha256 and size, and a mime type from its extension
// or, failing that, its first bytes. record must put the blob
// (store.Tx.PutBlob) in the transaction that adds the rows using it.
func (s *Store) Ingest(ctx context.Context, path string, record func(core.Media) error) (core.Media, error) {
	f, err := os.Open(path)
	if err != nil {
		return core.Media{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return core.Media{}, err
	}
	name := filepath.Base(path)
	if !st.Mode().IsRegular() {
		return core.Media{}, ErrNotRegular.New(name)
	}
	if st.Size() > s.lim.MaxSize {
		return core.Media{}, ErrOfferTooLarge.New(name, st.Size(), s.lim.MaxSize)
	}
	// The file may grow while it is copied: the limit holds all the same.
	t, m, err := s.receive(f, name, "", s.lim.MaxSize)
	if err == errTooLarge {
		err = ErrOfferGrew.New(name, s.lim.MaxSize)
	}
	if err != nil {
		return core.Media{}, err
	}
	err = s.install(ctx, t, func(sha string) error {
		m.SHA256 = sha
		return record(m)
	})
	return m, err
}

// errTooLarge is receive's refusal; callers say which limit it was.
var errTooLarge = errors.New("media: past the size limit")

// receive streams r into a temp file of the store, at most limit bytes:
// one byte more and the file is refused (errTooLarge) before anything
// else is read, its partial file removed. It describes what it stored:
// the file name made safe, the size, and the mime type declared (when it
// says more than application/octet-stream), else the name's extension's,
// else the one the first bytes suggest.
func (s *Store) receive(r io.Reader, name, declared string, limit int64) (*temp, core.Media, error) {
	t, err := s.newTemp()
	if err != nil {
		return nil, core.Media{}, err
	}
	head := make([]byte, 512)
	hn, err := io.ReadFull(r, head)
	head = head[:hn]
	more := err == nil // the head filled up: more may follow
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	if err == nil {
		_, err = t.Write(head)
	}
	if err == nil && more {
		_, err = io.Copy(t, io.LimitReader(r, limit+1-int64(hn)))
	}
	if err == nil && t.n > limit {
		err = errTooLarge
	}
	if err != nil {
		t.discard()
		return nil, core.Media{}, err
	}
	m := core.Media{Filename: CleanName(name), Size: t.n}
	if m.Filename == "" {
		m.Filename = "file"
	}
	if mt, _, perr := mime.ParseMediaType(declared); perr == nil && mt != "application/octet-stream" && len(mt) <= maxMimeBytes {
		m.Mime = mt
	} else if m.Mime = byExtension(m.Filename); m.Mime == "application/octet-stream" {
		m.Mime, _, _ = mime.ParseMediaType(http.DetectContentType(head))
	}
	m.Kind = KindOf(m.Mime)
	return t, m, nil
}
