package mobile

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/proto/mobilev1"
	"github.com/irisgate/irisgate/voice"
)

// Files the agent sends reach a phone as media frames. The codec only
// notes them: it runs inside the hub's fan-out, which must never wait, and
// a file is megabytes of base64. One goroutine per connection reads each
// file from the media store a chunk at a time and queues its frames at the
// pace the phone reads them (hub.Conn.SendWait), so a slow phone holds a
// chunk or two in memory, never a whole file, and delays nobody else.

// downChunkBytes is the size of a media chunk sent to a device: the
// protocol's ~3 MiB, less a little so one chunk, base64-encoded with its
// frame, fits in half a connection's default send queue (8 MiB), which is
// what a waiting send needs.
const downChunkBytes = mobilev1.MediaChunkBytes - 4<<10

// Bounds of a connection's files waiting to be sent.
const (
	// maxQueuedFiles is how many files may wait for a phone that reads
	// slowly; more are dropped (with a warning in the log), since a
	// phone that far behind is likely gone.
	maxQueuedFiles = 32
	// sentMemory is how many recent file ids a connection remembers: a
	// file is offered while the reply streams, then listed again in the
	// finished reply, and must be sent once.
	sentMemory = 64
)

// outFiles are the files waiting to be sent on one connection.
type outFiles struct {
	d *Dialect
	// voice, when set, is told on the sender's goroutine as each voice
	// file starts (done false) and has gone or failed (done true, with
	// how long it plays, 0 if unknown): the codec's avatar speaks while
	// they go and play.
	voice func(m core.Media, done bool, plays time.Duration)

	mu      sync.Mutex
	pending []core.Media
	seen    []string // ids of files queued lately, oldest first
	stopped bool
	wake    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{} // closed when the sender has ended; nil if never started
}

func newOutFiles(d *Dialect) *outFiles {
	return &outFiles{d: d, wake: make(chan struct{}, 1)}
}

// add queues a file unless it was queued lately, and reports whether it
// did. It never blocks.
func (o *outFiles) add(m core.Media) bool {
	if m.ID == "" {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped || slices.Contains(o.seen, m.ID) {
		return false
	}
	if len(o.seen) == sentMemory {
		o.seen = slices.Delete(o.seen, 0, 1)
	}
	o.seen = append(o.seen, m.ID)
	if len(o.pending) >= maxQueuedFiles {
		o.d.cfg.Log.Warn("mobile: too many files wait for a slow device; one is not sent", "media", m.ID)
		return false
	}
	o.pending = append(o.pending, m)
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true
}

// start runs the sender for conn until stop.
func (o *outFiles) start(conn *hub.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		cancel()
		return
	}
	o.cancel, o.done = cancel, make(chan struct{})
	go o.run(ctx, conn)
}

// stop ends the sender, abandoning a file half sent (the phone drops
// what it had of it with the connection), and waits for it.
func (o *outFiles) stop() {
	o.mu.Lock()
	o.stopped = true
	o.pending = nil
	cancel, done := o.cancel, o.done
	o.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (o *outFiles) run(ctx context.Context, conn *hub.Conn) {
	defer close(o.done)
	for {
		o.mu.Lock()
		var m core.Media
		have := len(o.pending) > 0
		if have {
			m = o.pending[0]
			o.pending = slices.Delete(o.pending, 0, 1)
		}
		o.mu.Unlock()
		if !have {
			select {
			case <-o.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		voice := o.voice != nil && isVoice(m)
		if voice {
			o.voice(m, false, 0)
		}
		plays, err := o.send(ctx, conn, m.ID)
		if voice {
			o.voice(m, true, plays)
		}
		if err != nil {
			if ctx.Err() != nil || conn.Err() != nil {
				return
			}
			o.d.cfg.Log.Warn("mobile: a file was not sent", "device", conn.DeviceID, "media", m.ID, "err", err)
		}
	}
}

// isVoice reports whether a file reaches the phone as a voice message.
func isVoice(m core.Media) bool { return outKind(m.Kind, m.Mime) == "voice" }

// send streams one stored file as media frames, and says how long it
// plays when it is voice whose length its headers tell. The store is
// asked again rather than trusting the event: the file may have been
// deleted since.
func (o *outFiles) send(ctx context.Context, conn *hub.Conn, mediaID string) (plays time.Duration, err error) {
	m, f, err := o.d.cfg.GW.PullMedia(ctx, mediaID)
	if err != nil {
		if errors.Is(err, gateway.ErrUnknownMedia) || errors.Is(err, media.ErrGone) {
			return 0, nil // deleted with its message meanwhile
		}
		return 0, err
	}
	defer f.Close()
	send := func(out hub.Out) error { return conn.SendWait(ctx, out) }
	if m.Size > mobilev1.MaxMediaBytes {
		// The protocol's ceiling holds both ways: the app is told where
		// the file is instead.
		text := fmt.Sprintf("📎 %s (%s) is larger than the %d MiB this app takes: open it from this conversation on another device.",
			m.Filename, humanSize(m.Size), mobilev1.MaxMediaBytes>>20)
		for _, out := range messageFrames(core.NewMessageID(), text, false, true) {
			if err := send(out); err != nil {
				return 0, err
			}
		}
		return 0, nil
	}
	kind := outKind(m.Kind, m.Mime)
	if kind == "voice" {
		plays = voice.Duration(m.Mime, f, m.Size)
	}
	return plays, mediaFrames(mobilev1.MediaOut{ID: m.ID, Kind: kind, Mime: m.Mime, Filename: m.Filename},
		m.Size, io.NewSectionReader(f, 0, m.Size), downChunkBytes, send)
}

// outKind is the protocol's kind for a stored file, from its mime type
// first (what the app must be able to play or show), then the kind it was
// stored as.
func outKind(kind, mimeType string) string {
	if mimeType == "image/gif" {
		return "animation"
	}
	k := media.KindOf(mimeType)
	if k == "document" { // the mime type says nothing more
		k = kind
	}
	switch k {
	case "image", "video", "voice":
		return k
	case "audio":
		return "voice"
	}
	return "document"
}

// mediaFrames calls send with each frame of a file of size bytes read
// from r: parts of at most chunk bytes, base64-encoded, all with h's id,
// kind, mime and filename, the caption on the first, the last final. One
// chunk is in memory at a time. It stops at the first error, and fails if
// r holds fewer than size bytes.
func mediaFrames(h mobilev1.MediaOut, size int64, r io.Reader, chunk int, send func(hub.Out) error) error {
	parts := max(int((size+int64(chunk)-1)/int64(chunk)), 1)
	buf := make([]byte, min(int64(chunk), size))
	caption := h.Caption
	h.T, h.Parts, h.Size, h.Data = "media", parts, size, ""
	for i := range parts {
		n := min(int64(chunk), size-int64(i)*int64(chunk))
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return fmt.Errorf("reading part %d of %d: %w", i, parts, err)
		}
		h.Part, h.Final, h.Caption = i, i == parts-1, ""
		if i == 0 {
			h.Caption = caption
		}
		// The data is spliced in rather than marshalled: base64 needs no
		// escaping, and a marshal would copy megabytes once more.
		head := mobilev1.Marshal(h)
		out := make([]byte, 0, len(head)+len(`,"data":""`)+base64.StdEncoding.EncodedLen(int(n)))
		out = append(out, head[:len(head)-1]...)
		out = append(out, `,"data":"`...)
		out = base64.StdEncoding.AppendEncode(out, buf[:n])
		out = append(out, `"}`...)
		if err := send(hub.Out{Data: out}); err != nil {
			return err
		}
	}
	return nil
}
