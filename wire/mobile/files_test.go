package mobile

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/mobilev1"
	"github.com/irisgate/irisgate/store"
)

type noFrames struct{}

func (noFrames) Frames(*core.Event, int64) []hub.Out { return nil }

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestMediaFramesPaced: a file goes to a connection at the pace its
// writer drains the queue. However large the file, what is read of it is
// never more than two chunks ahead of what the writer took (one queued,
// one waiting for room), so a phone that reads slowly costs a chunk or
// two of memory, not the file.
func TestMediaFramesPaced(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := hub.New(st, slog.Default(), hub.DefaultLimits)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := h.Add(ctx, "mobile:slow", noFrames{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Remove(conn)

	const chunk = downChunkBytes
	file := bytes.Repeat([]byte("irisgate"), (5*chunk+100)/8)
	r := &countingReader{r: bytes.NewReader(file)}
	sent := make(chan error, 1)
	go func() {
		sent <- mediaFrames(mobilev1.MediaOut{ID: "md_1", Kind: "document", Mime: "application/pdf", Filename: "f.pdf"}, int64(len(file)), r, chunk,
			func(o hub.Out) error { return conn.SendWait(ctx, o) })
	}()
	var (
		got   []byte
		taken int
		buf   []hub.Out
	)
	for taken < 6 {
		if buf, err = conn.Take(ctx, buf); err != nil {
			t.Fatal(err)
		}
		for _, o := range buf {
			var f struct {
				Part int    `json:"part"`
				Data string `json:"data"`
			}
			if err := json.Unmarshal(o.Data, &f); err != nil || f.Part != taken {
				t.Fatalf("frame %d: part %d, %v", taken, f.Part, err)
			}
			b, _ := base64.StdEncoding.DecodeString(f.Data)
			got = append(got, b...)
			taken++
		}
		if read := r.n.Load(); read > int64(taken+2)*chunk {
			t.Fatalf("%d bytes read with %d frames taken: the sender ran ahead of the writer", read, taken)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, file) {
		t.Fatalf("%d bytes arrived, want %d", len(got), len(file))
	}
}
