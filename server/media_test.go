package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/server"
)

// testMax is the media size limit of these tests: big enough for several
// binary frames, small enough to run fast.
const testMax = 300 << 10

func mediaLimits(l media.Limits) func(*server.AppConfig) {
	return func(c *server.AppConfig) { c.Media = l }
}

// blob is n bytes that differ with seed.
func blob(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// rawIDs are request ids for frames sent by hand, far above the client's.
var rawIDs atomic.Int64

func init() { rawIDs.Store(1 << 40) }

// sendFrame sends a request frame with an id of its own and returns the id.
func sendFrame(t *testing.T, d *testgw.Device, typ string, p any) int64 {
	t.Helper()
	id := rawIDs.Add(1)
	pb, _ := json.Marshal(p)
	b, _ := json.Marshal(client.Frame{Envelope: client.Envelope{V: 1, ID: id, Type: typ, Payload: pb}})
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	if err := d.SendRaw(ctx, b, false); err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	return id
}

// startUpload sends media.upload.start; it has no answer unless it fails.
func startUpload(t *testing.T, d *testgw.Device, ref string, size int, extra ...any) int64 {
	t.Helper()
	p := map[string]any{"media_ref": ref, "kind": "document", "mime": "application/octet-stream", "size": size, "filename": ref + ".bin"}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == nil {
			delete(p, extra[i].(string))
		} else {
			p[extra[i].(string)] = extra[i+1]
		}
	}
	return sendFrame(t, d, "media.upload.start", p)
}

// sendBytes sends data in binary frames of chunk bytes.
func sendBytes(t *testing.T, d *testgw.Device, data []byte, chunk int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	for len(data) > 0 {
		n := min(chunk, len(data))
		if err := d.SendRaw(ctx, data[:n], true); err != nil {
			t.Fatalf("binary frame: %v", err)
		}
		data = data[n:]
	}
}

func endUpload(t *testing.T, d *testgw.Device, ref, sha string) (client.Frame, error) {
	t.Helper()
	return d.Do("media.upload.end", client.Lane{}, map[string]any{"media_ref": ref, "sha256": sha})
}

// upload sends a whole file and checks its acknowledgement.
func upload(t *testing.T, d *testgw.Device, ref string, data []byte, chunk int, extra ...any) {
	t.Helper()
	startUpload(t, d, ref, len(data), extra...)
	sendBytes(t, d, data, chunk)
	ack, err := endUpload(t, d, ref, sum(data))
	if err != nil {
		t.Fatalf("upload %s: %v", ref, err)
	}
	if p := testgw.P(t, ack); ack.Type != "media.upload.ack" || p["ok"] != true || p["media_ref"] != ref {
		t.Fatalf("upload %s answered with %s", ref, ack.Raw)
	}
}

// mediaItem is an entry of a message's media list.
type mediaItem struct {
	MediaID   string `json:"media_id"`
	Kind      string `json:"kind"`
	Mime      string `json:"mime"`
	Size      int64  `json:"size"`
	Filename  string `json:"filename"`
	MessageID string `json:"message_id"`
	SHA256    string `json:"sha256"`
}

func mediaOf(t *testing.T, f client.Frame) []mediaItem {
	t.Helper()
	var p struct {
		Media []mediaItem `json:"media"`
	}
	if err := f.Decode(&p); err != nil {
		t.Fatalf("%s: %v", f.Type, err)
	}
	return p.Media
}

// sendWith sends a message with media_refs and returns the echo.
func sendWith(t *testing.T, d *testgw.Device, lane client.Lane, text string, refs ...string) (client.Frame, error) {
	t.Helper()
	return d.Do("message.send", lane, map[string]any{"text": text, "media_refs": refs})
}

// pull fetches a file: the header, the bytes and whether the end said ok.
func pull(t *testing.T, d *testgw.Device, mediaID string) (mediaItem, []byte, error) {
	t.Helper()
	end, err := d.Do("media.pull", client.Lane{}, map[string]any{"media_id": mediaID})
	if err != nil {
		return mediaItem{}, nil, err
	}
	if end.Type != "media.pull.end" {
		t.Fatalf("media.pull answered with %s", end.Raw)
	}
	got := until(t, d, func(f client.Frame) bool { return f.ID == end.ID && f.Type == "media.pull.end" })
	var hdr mediaItem
	var data []byte
	seen := false
	for _, f := range got[:len(got)-1] {
		switch {
		case !f.Binary && f.Type == "media.pull" && f.ID == end.ID:
			if seen {
				t.Fatalf("two headers for one pull")
			}
			seen = true
			if err := f.Decode(&hdr); err != nil {
				t.Fatal(err)
			}
		case f.Binary:
			if !seen {
				t.Fatalf("binary frame before the pull's header")
			}
			if len(f.Raw) > 1<<20 {
				t.Errorf("a binary frame of %d bytes", len(f.Raw))
			}
			data = append(data, f.Raw...)
		}
	}
	if !seen {
		t.Fatalf("no media.pull header before its end")
	}
	if testgw.P(t, end)["ok"] != true {
		t.Fatalf("media.pull.end = %s", end.Raw)
	}
	return hdr, data, nil
}

// stored lists the files in the gateway's media directory, partial
// uploads included.
func stored(t *testing.T, g *testgw.GW) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(g.Dir, server.MediaDir), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, g.Dir))
		}
		return nil
	})
	return out
}

// eventually waits, up to testgw.Wait, for cond: for what the gateway does
// after a connection is gone, which no frame can announce.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testgw.Wait)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, testgw.Wait)
		}
		<-tick.C
	}
}

func TestUploadRoundTrips(t *testing.T) { testUploadRoundTrips(t) }

func testUploadRoundTrips(t *testing.T, on ...func(*server.AppConfig)) {
	g := testgw.Start(t, with(on, mediaLimits(media.Limits{MaxSize: testMax}))...)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	files := map[string][]byte{
		"empty": {},
		"one":   {42},
		"limit": blob(testMax, 1),
		"odd":   blob(100_003, 2),
	}
	refs := []string{"empty", "one", "limit", "odd"}
	for _, ref := range refs {
		upload(t, a, ref, files[ref], 64<<10)
	}
	echo, err := sendWith(t, a, def, "four files", refs...)
	if err != nil {
		t.Fatal(err)
	}
	ms := mediaOf(t, echo)
	if len(ms) != len(refs) {
		t.Fatalf("the message lists %d files, want %d: %s", len(ms), len(refs), echo.Raw)
	}
	// The other device gets the echo with the same list.
	other := b.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "four files" })
	if got := mediaOf(t, other); !slices.Equal(got, ms) {
		t.Errorf("the other device's echo lists %+v", got)
	}
	for i, m := range ms {
		ref := refs[i]
		if !strings.HasPrefix(m.MediaID, "md_") || m.Size != int64(len(files[ref])) || m.Filename != ref+".bin" || m.Kind != "document" ||
			m.Mime != "application/octet-stream" {
			t.Errorf("media %d: %+v", i, m)
		}
		// Any device may pull it.
		hdr, data, err := pull(t, b, m.MediaID)
		if err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
		if !bytes.Equal(data, files[ref]) {
			t.Errorf("%s: pulled %d bytes that differ from the %d uploaded", ref, len(data), len(files[ref]))
		}
		if hdr.MediaID != m.MediaID || hdr.Size != int64(len(files[ref])) || hdr.SHA256 != sum(files[ref]) || hdr.Filename != ref+".bin" {
			t.Errorf("%s: header %+v", ref, hdr)
		}
	}
	// History keeps them.
	hf := a.MustDo("history", def, nil)
	var h struct {
		Messages []json.RawMessage `json:"messages"`
	}
	hf.Decode(&h)
	if len(h.Messages) == 0 || !strings.Contains(string(h.Messages[0]), ms[2].MediaID) {
		t.Errorf("history lacks the files: %s", hf.Raw)
	}
	// A ref is used up by the message that attached it.
	_, err = sendWith(t, a, def, "again", "one")
	wantCode(t, err, "not_found")

	// Over the limit: declared, or sent beyond what was declared.
	id := startUpload(t, a, "big", testMax+1)
	f := a.Expect("error", reply(id))
	if testgw.Str(t, f, "code") != "media_too_large" {
		t.Fatalf("a start over the limit: %s", f.Raw)
	}
	sendBytes(t, a, blob(1000, 3), 500) // sent before the device heard: dropped without a word
	_, err = endUpload(t, a, "big", sum(blob(testMax+1, 3)))
	wantCode(t, err, "not_found") // it never began
	over := blob(testMax+1, 4)
	id = startUpload(t, a, "liar", testMax)
	sendBytes(t, a, over, 64<<10)
	f = a.Expect("error", reply(id))
	if testgw.Str(t, f, "code") != "media_too_large" || !strings.Contains(testgw.Str(t, f, "message"), "declared size") {
		t.Fatalf("bytes beyond the declared size: %s", f.Raw)
	}
	// Its end is told why, once more; the frames after the overrun were
	// dropped without an error each.
	_, err = endUpload(t, a, "liar", sum(over[:testMax]))
	wantCode(t, err, "media_too_large")
	none(t, "phone", barrier(t, a), func(f client.Frame) bool { return f.Type == "error" && (f.ID == id || f.ID == 0) })

	// Nothing of the failures is on disk: only the four files (the empty
	// file too: it is a file like any other).
	if got := stored(t, g); len(got) != len(files) {
		t.Fatalf("stored files: %v, want %d", got, len(files))
	}
	if n, bytes := g.App.Media.Pending("phone"); n != 0 || bytes != 0 {
		t.Errorf("pending uploads %d (%d bytes) after all ended", n, bytes)
	}
}

func TestUploadSplitAndInterleaved(t *testing.T) {
	g := testgw.Start(t, mediaLimits(media.Limits{MaxSize: testMax}))
	a := g.Dial(t, "phone")
	ctx := context.Background()
	one, two := blob(50_000, 5), blob(70_000, 6)

	// Frames of every size, with requests between them: the bytes only
	// count in binary frames, in order.
	startUpload(t, a, "one", len(one), "kind", "image", "mime", "image/png", "filename", "../../etc/passwd\x00.png")
	cuts := []int{1, 7, 1000, 4096, 65536 - 1000}
	rest := one
	for i, n := range cuts {
		n = min(n, len(rest))
		if err := a.SendRaw(ctx, rest[:n], true); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
		if i%2 == 0 {
			a.MustDo("ping", client.Lane{}, nil)
		} else {
			a.MustDo("history", def, nil)
		}
	}
	sendBytes(t, a, rest, 3333)

	// A second upload while the first waits for its end; they end in the
	// other order.
	startUpload(t, a, "two", len(two), "mime", "audio/ogg", "filename", "", "kind", nil)
	sendBytes(t, a, two, 17_000)
	ack, err := endUpload(t, a, "two", sum(two))
	if err != nil || ack.Type != "media.upload.ack" {
		t.Fatalf("end two: %v %s", err, ack.Raw)
	}
	// Upper-case hex is the same sha256.
	ack, err = endUpload(t, a, "one", strings.ToUpper(sum(one)))
	if err != nil || ack.Type != "media.upload.ack" {
		t.Fatalf("end one: %v %s", err, ack.Raw)
	}
	echo, err := sendWith(t, a, def, "", "one", "two", "one")
	if err != nil {
		t.Fatal(err)
	}
	ms := mediaOf(t, echo)
	if len(ms) != 2 {
		t.Fatalf("media %+v: want two, a repeated ref attached once", ms)
	}
	if ms[0].Kind != "image" || ms[0].Mime != "image/png" || ms[0].Filename != "passwd.png" {
		t.Errorf("one: %+v (the file name must lose its path and control characters)", ms[0])
	}
	if ms[1].Kind != "audio" || ms[1].Filename != "two" {
		t.Errorf("two: %+v (kind from the mime type, name from the ref)", ms[1])
	}
	for i, want := range [][]byte{one, two} {
		if _, data, _ := pull(t, a, ms[i].MediaID); !bytes.Equal(data, want) {
			t.Errorf("file %d does not round-trip", i)
		}
	}
}

func TestUploadDroppedWithItsConnection(t *testing.T) {
	g := testgw.Start(t, mediaLimits(media.Limits{MaxSize: testMax}))
	a := g.Dial(t, "phone")
	data := blob(testMax, 7)
	startUpload(t, a, "half", len(data))
	sendBytes(t, a, data[:len(data)/2], 32<<10)
	startUpload(t, a, "whole", 1000)
	sendBytes(t, a, data[:1000], 1000)
	barrier(t, a) // the bytes are on disk
	if got := stored(t, g); len(got) != 2 {
		t.Fatalf("partial files while uploading: %v, want 2", got)
	}
	a.CloseNow() // a lost network, no goodbye
	eventually(t, "partial files removed", func() bool { return len(stored(t, g)) == 0 })
	if n, _ := g.App.Media.Pending("phone"); n != 0 {
		t.Fatalf("%d uploads still counted for the device", n)
	}
	// The device comes back: nothing of it is left to end, and its limits
	// are whole again.
	a = g.Dial(t, "phone")
	_, err := endUpload(t, a, "whole", sum(data[:1000]))
	wantCode(t, err, "not_found")
	_, err = sendWith(t, a, def, "x", "whole")
	wantCode(t, err, "not_found")
	var starts []int64
	for i := range 8 {
		starts = append(starts, startUpload(t, a, fmt.Sprint("again", i), 10))
	}
	none(t, "phone", barrier(t, a), func(f client.Frame) bool { return f.Type == "error" && slices.Contains(starts, f.ID) })
}

func TestUploadChecksum(t *testing.T) {
	g := testgw.Start(t, mediaLimits(media.Limits{MaxSize: testMax}))
	a := g.Dial(t, "phone")
	data := blob(10_000, 8)
	for _, c := range []struct{ name, sha string }{
		{"mismatch", sum(blob(10_000, 9))},
		{"not hex", strings.Repeat("z", 64)},
		{"short", sum(data)[:10]},
		{"missing", ""},
	} {
		startUpload(t, a, "x", len(data))
		sendBytes(t, a, data, 4096)
		_, err := endUpload(t, a, "x", c.sha)
		wantCode(t, err, "unsupported")
		_, err = sendWith(t, a, def, c.name, "x")
		wantCode(t, err, "not_found")
	}
	// An end before all the bytes came.
	startUpload(t, a, "short", len(data))
	sendBytes(t, a, data[:9000], 4096)
	_, err := endUpload(t, a, "short", sum(data))
	wantCode(t, err, "unsupported")
	if got := stored(t, g); len(got) != 0 {
		t.Fatalf("failed uploads left files: %v", got)
	}
	// Binary frames outside an upload are refused, the connection stays.
	ctx := context.Background()
	if err := a.SendRaw(ctx, []byte("stray"), true); err != nil {
		t.Fatal(err)
	}
	f := a.Expect("error", reply(0))
	if testgw.Str(t, f, "code") != "unsupported" || !strings.Contains(testgw.Str(t, f, "message"), "outside") {
		t.Fatalf("stray binary frame: %s", f.Raw)
	}
	// Malformed starts.
	for _, p := range []map[string]any{
		{"kind": "image", "size": 1},                                       // no ref
		{"media_ref": "r", "kind": "image"},                                // no size
		{"media_ref": "r", "kind": "image", "size": -1},                    // negative
		{"media_ref": "r", "kind": "hologram", "size": 1},                  // kind
		{"media_ref": "r", "kind": "image", "size": 1, "mime": "not mime"}, // mime
		{"media_ref": strings.Repeat("r", 200), "size": 1},                 // long ref
	} {
		id := sendFrame(t, a, "media.upload.start", p)
		if f := a.Expect("error", reply(id)); testgw.Str(t, f, "code") != "unsupported" {
			t.Errorf("start %v: %s", p, f.Raw)
		}
	}
	_, _, err = pull(t, a, "md_nothing")
	wantCode(t, err, "not_found")
}

// The limits on unfinished uploads are a device's and, since a device id is
// the client's to choose, its token's: the devices of one token together
// hold at most media.DefaultTokenDevices devices' worth. Another token
// has limits of its own.
func TestUploadLimitsPerDeviceAndToken(t *testing.T) {
	g := testgw.Start(t, mediaLimits(media.Limits{MaxSize: testMax}))
	a := g.Dial(t, "phone")
	tok, _, err := gateway.CreateToken(context.Background(), g.App.Store, "tablet", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.DialErr(t, "tablet", tok)
	if err != nil {
		t.Fatal(err)
	}
	files := make([][]byte, 9)
	for i := range files {
		files[i] = blob(1000+i, byte(20+i))
	}
	// Eight uploads at once, each with its bytes, none ended yet.
	for i := range 8 {
		startUpload(t, a, fmt.Sprint("f", i), len(files[i]))
		sendBytes(t, a, files[i], 300)
	}
	id := startUpload(t, a, "f8", len(files[8]))
	f := a.Expect("error", reply(id))
	if testgw.Str(t, f, "code") != "rate_limited" || !strings.Contains(testgw.Str(t, f, "message"), "unfinished uploads") {
		t.Fatalf("the ninth upload: %s", f.Raw)
	}
	// New device ids with the same token add up to the token's bound.
	for d := 1; d < media.DefaultTokenDevices; d++ {
		other := g.Dial(t, fmt.Sprint("phone-renamed-", d))
		var starts []int64
		for i := range 8 {
			starts = append(starts, startUpload(t, other, fmt.Sprint("g", i), 10))
		}
		none(t, other.ID, barrier(t, other), func(f client.Frame) bool { return f.Type == "error" && slices.Contains(starts, f.ID) })
	}
	more := g.Dial(t, "phone-renamed-again")
	id = startUpload(t, more, "f8", len(files[8]))
	if f := more.Expect("error", reply(id)); testgw.Str(t, f, "code") != "rate_limited" || !strings.Contains(testgw.Str(t, f, "message"), "token") {
		t.Fatalf("an upload beyond the token's bound under yet another device id: %s", f.Raw)
	}
	// Another token has limits of its own.
	upload(t, b, "f8", files[8], 500)
	// Ending one makes room.
	for i := range 8 {
		if _, err := endUpload(t, a, fmt.Sprint("f", i), sum(files[i])); err != nil {
			t.Fatalf("end f%d: %v", i, err)
		}
		if i == 0 {
			upload(t, a, "f8", files[8], 500)
		}
	}
	refs := []string{"f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8"}
	echo, err := sendWith(t, a, def, "nine", refs...)
	if err != nil || len(mediaOf(t, echo)) != 9 {
		t.Fatalf("nine files: %v %s", err, echo.Raw)
	}
	// The device's bytes in flight are bounded too.
	g2 := testgw.Start(t, mediaLimits(media.Limits{MaxSize: testMax, MaxPendingBytes: testMax + testMax/2}))
	c := g2.Dial(t, "phone")
	ok1 := startUpload(t, c, "a", testMax)
	id = startUpload(t, c, "b", testMax)
	if f := c.Expect("error", reply(id)); testgw.Str(t, f, "code") != "rate_limited" {
		t.Fatalf("over the bytes in flight: %s", f.Raw)
	}
	ok2 := startUpload(t, c, "c", testMax/2)
	none(t, "phone", barrier(t, c), func(f client.Frame) bool { return f.Type == "error" && (f.ID == ok1 || f.ID == ok2) })
}

func TestPullWhileAnotherDeviceUploads(t *testing.T) {
	g := testgw.Start(t) // the default limit, 64 MiB
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	first, second := blob(3<<20+17, 30), blob(4<<20, 31)
	upload(t, a, "first", first, 1<<20)
	echo, err := sendWith(t, a, def, "here", "first")
	if err != nil {
		t.Fatal(err)
	}
	id := mediaOf(t, echo)[0].MediaID

	// The tablet uploads in full frames while the phone pulls.
	startUpload(t, b, "second", len(second))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
		defer cancel()
		for rest := second; len(rest) > 0; {
			n := min(1<<20, len(rest))
			if err := b.SendRaw(ctx, rest[:n], true); err != nil {
				t.Errorf("tablet: %v", err)
				return
			}
			rest = rest[n:]
		}
	}()
	_, data, err := pull(t, a, id)
	wg.Wait()
	if err != nil || !bytes.Equal(data, first) {
		t.Fatalf("pull during an upload: %v, %d bytes", err, len(data))
	}
	if ack, err := endUpload(t, b, "second", sum(second)); err != nil || ack.Type != "media.upload.ack" {
		t.Fatalf("the upload during a pull: %v", err)
	}
	// Two pulls asked for at once come one after the other.
	r1 := sendFrame(t, a, "media.pull", map[string]any{"media_id": id})
	r2 := sendFrame(t, a, "media.pull", map[string]any{"media_id": id})
	got := until(t, a, func(f client.Frame) bool { return f.ID == r2 && f.Type == "media.pull.end" })
	var order []string
	n := 0
	for _, f := range got {
		switch {
		case f.Binary:
			n += len(f.Raw)
		case f.ID == r1 || f.ID == r2:
			order = append(order, fmt.Sprintf("%s/%d", f.Type, f.ID-r1))
			if f.Type == "media.pull.end" && n != len(first) {
				t.Fatalf("%d bytes before %s", n, f.Raw)
			}
			if f.Type == "media.pull.end" {
				n = 0
			}
		}
	}
	if want := []string{"media.pull/0", "media.pull.end/0", "media.pull/1", "media.pull.end/1"}; !slices.Equal(order, want) {
		t.Fatalf("pull frames %v, want %v", order, want)
	}
}
