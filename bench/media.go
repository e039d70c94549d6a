package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/server"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// The media scenario has one device upload a file of MediaSize bytes in
// 1 MiB binary frames (media.upload.start → frames → media.upload.end →
// ack), attach it to a message, then pull it back (media.pull → header,
// frames, media.pull.end), a few rounds with different bytes each time.

const (
	mediaRounds = 3
	mediaFrame  = 1 << 20 // the gateway's default binary frame limit
)

func runMedia(ctx context.Context, o *Options) (r Result) {
	size := o.MediaSize
	r.Title = fmt.Sprintf("(g) Media: upload and pull of a %s file over one connection", mib(float64(size)))
	g, err := startGateway(o, "media", nullAgent{}, func(c *server.AppConfig) { c.Media.MaxSize = int64(size) })
	if err != nil {
		r.Err = err
		return r
	}
	defer g.close()
	dev, err := dialMediaDev(ctx, g.url)
	if err != nil {
		r.Err = err
		return r
	}
	defer dev.close()

	var ups, pulls []time.Duration
	rnd := rand.New(rand.NewSource(2))
	data := make([]byte, size)
	bad := 0
	for round := range mediaRounds {
		o.progress("media: round %d", round+1)
		rnd.Read(data)
		sum := sha256.Sum256(data)
		ref := fmt.Sprint("bench", round)
		t0 := time.Now()
		if err := dev.upload(ctx, ref, data, hex.EncodeToString(sum[:])); err != nil {
			r.Err = fmt.Errorf("upload: %w", err)
			return r
		}
		ups = append(ups, time.Since(t0))
		id, err := dev.attach(ctx, ref)
		if err != nil {
			r.Err = fmt.Errorf("message.send: %w", err)
			return r
		}
		t0 = time.Now()
		got, n, err := dev.pull(ctx, id)
		if err != nil {
			r.Err = fmt.Errorf("pull: %w", err)
			return r
		}
		pulls = append(pulls, time.Since(t0))
		if n != int64(size) || got != sum {
			bad++
		}
	}
	slices.Sort(ups)
	slices.Sort(pulls)
	mbps := func(d time.Duration) string {
		return fmt.Sprintf("%.0f MB/s (%.2fs)", float64(size)/1e6/d.Seconds(), d.Seconds())
	}
	r.setup("One device (raw WebSocket on loopback), %d rounds of fresh random bytes: upload in %s binary frames from", mediaRounds, mib(mediaFrame))
	r.setup("media.upload.start to media.upload.ack (the file hashed, fsynced and in the content store); attach it with")
	r.setup("message.send; pull it from media.pull to media.pull.end (the device hashes what it reads). Median round shown.")
	r.fig("upload throughput", mbps(ups[len(ups)/2]), "", nil)
	r.fig("pull throughput", mbps(pulls[len(pulls)/2]), "", nil)
	r.fig("best upload / pull", mbps(ups[0])+" / "+mbps(pulls[0]), "", nil)
	r.check("pulls that differ from the upload", fmt.Sprint(bad), "0", bad == 0)
	r.Notes = append(r.Notes, g.logs.summary()...)
	return r
}

// mediaDev is a raw device that reads binary frames too.
type mediaDev struct {
	*rawDev
	frames chan mediaFrameIn
}

type mediaFrameIn struct {
	text   []byte // a text frame, copied
	binary int    // or a binary frame's length
	sum    *[32]byte
}

func dialMediaDev(ctx context.Context, url string) (*mediaDev, error) {
	d, err := dialRaw(ctx, url, "media-bench")
	if err != nil {
		return nil, err
	}
	m := &mediaDev{rawDev: d, frames: make(chan mediaFrameIn, 64)}
	go m.read()
	return m, nil
}

// read delivers text frames and, for binary frames, their length; the
// bytes of a pull are hashed here as they arrive.
func (d *mediaDev) read() {
	defer close(d.done)
	defer close(d.frames)
	h := sha256.New()
	var buf bytes.Buffer
	for {
		typ, rd, err := d.ws.Reader(context.Background())
		if err != nil {
			d.err = err
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(rd); err != nil {
			d.err = err
			return
		}
		if typ == websocket.MessageBinary {
			h.Write(buf.Bytes())
			d.frames <- mediaFrameIn{binary: buf.Len()}
			continue
		}
		f := mediaFrameIn{text: bytes.Clone(buf.Bytes())}
		switch string(frameType(f.text)) {
		case irisv1.TypeMediaPull:
			h.Reset()
		case irisv1.TypeMediaPullEnd:
			var s [32]byte
			h.Sum(s[:0])
			f.sum = &s
		}
		d.frames <- f
	}
}

// await returns the text frame answering id (skipping others); pull
// bytes are counted into n when given.
func (d *mediaDev) await(ctx context.Context, id int64, want string, n *int64) (mediaFrameIn, error) {
	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	for {
		select {
		case f, ok := <-d.frames:
			if !ok {
				return f, fmt.Errorf("connection ended: %v", d.err)
			}
			if f.text == nil {
				if n != nil {
					*n += int64(f.binary)
				}
				continue
			}
			if frameID(f.text) != id {
				continue
			}
			switch string(frameType(f.text)) {
			case want:
				return f, nil
			case irisv1.TypeError:
				return f, fmt.Errorf("%s", f.text)
			}
		case <-ctx.Done():
			return mediaFrameIn{}, ctx.Err()
		case <-timeout.C:
			return mediaFrameIn{}, fmt.Errorf("no %s within 2 minutes", want)
		}
	}
}

func (d *mediaDev) upload(ctx context.Context, ref string, data []byte, sum string) error {
	id := d.newID()
	start := fmt.Sprintf(`{"media_ref":%q,"kind":"document","mime":"application/octet-stream","size":%d,"filename":"bench.bin"}`, ref, len(data))
	if err := d.sendID(ctx, id, irisv1.TypeMediaUploadStart, "", []byte(start)); err != nil {
		return err
	}
	for rest := data; len(rest) > 0; {
		n := min(mediaFrame, len(rest))
		d.wmu.Lock()
		err := d.ws.Write(ctx, websocket.MessageBinary, rest[:n])
		d.wmu.Unlock()
		if err != nil {
			return err
		}
		rest = rest[n:]
	}
	if err := d.sendID(ctx, id, irisv1.TypeMediaUploadEnd, "", []byte(fmt.Sprintf(`{"media_ref":%q,"sha256":%q}`, ref, sum))); err != nil {
		return err
	}
	_, err := d.await(ctx, id, irisv1.TypeMediaUploadAck, nil)
	return err
}

func (d *mediaDev) attach(ctx context.Context, ref string) (string, error) {
	id, err := d.send(ctx, irisv1.TypeMessageSend, "default", []byte(fmt.Sprintf(`{"text":"a file","media_refs":[%q]}`, ref)))
	if err != nil {
		return "", err
	}
	f, err := d.await(ctx, id, irisv1.TypeMessage, nil)
	if err != nil {
		return "", err
	}
	mid := string(stringAfter(f.text, []byte(`"media_id":"`)))
	if mid == "" {
		return "", fmt.Errorf("the message lists no media: %s", f.text)
	}
	return mid, nil
}

func (d *mediaDev) pull(ctx context.Context, mediaID string) ([32]byte, int64, error) {
	id := d.newID()
	if err := d.sendID(ctx, id, irisv1.TypeMediaPull, "", []byte(`{"media_id":`+strconv.Quote(mediaID)+`}`)); err != nil {
		return [32]byte{}, 0, err
	}
	var n int64
	f, err := d.await(ctx, id, irisv1.TypeMediaPullEnd, &n)
	if err != nil {
		return [32]byte{}, n, err
	}
	if !bytes.Contains(f.text, []byte(`"ok":true`)) {
		return [32]byte{}, n, fmt.Errorf("pull failed: %s", f.text)
	}
	return *f.sum, n, nil
}
