package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// floodList is the attacks, sized by o.
func floodList(o *Options) []flood {
	q := func(full, quick int) int {
		if o.Quick {
			return quick
		}
		return full
	}
	syncs, sends, preDur, preMax, phones, ids := q(100_000, 2_000), q(10_000, 300), q(5, 1), q(8_000, 300), q(30, 3), q(40, 6)
	hold := time.Duration(q(1000, 200)) * time.Millisecond // how long a flood's connections stay after it
	return []flood{
		{fmt.Sprintf("%s syncs on one connection", commas(int64(syncs))), func(ctx context.Context, o *Options, g *subGateway) (string, error) {
			return floodSync(ctx, g, syncs, q(40, 8), hold)
		}},
		{fmt.Sprintf("%s message.send into one lane", commas(int64(sends))), func(ctx context.Context, o *Options, g *subGateway) (string, error) {
			return floodSend(ctx, g, sends)
		}},
		{fmt.Sprintf("connections that never say hello, %ds", preDur), func(ctx context.Context, o *Options, g *subGateway) (string, error) {
			return floodPreHello(ctx, g, time.Duration(preDur)*time.Second, preMax)
		}},
		{fmt.Sprintf("%d Hermes Mobile phones each holding an unfinished 16 MiB frame", phones), func(ctx context.Context, o *Options, g *subGateway) (string, error) {
			return floodMobileFrames(ctx, g, phones, 3*hold)
		}},
		{fmt.Sprintf("8 unfinished uploads under each of %d device ids of one token", ids), func(ctx context.Context, o *Options, g *subGateway) (string, error) {
			return floodUploads(ctx, g, ids)
		}},
	}
}

// floodSync fills the outbox with enough to block a replay on a device
// that does not read, then sends n syncs on such a connection.
func floodSync(ctx context.Context, g *subGateway, n, fill int, hold time.Duration) (string, error) {
	filler, err := dialRaw(ctx, g.url, "filler")
	if err != nil {
		return "", err
	}
	defer filler.close()
	idle := make(chan struct{}, fill)
	filler.serve(func(b []byte) {
		if string(frameType(b)) == irisv1.TypeAgentIdle {
			idle <- struct{}{}
		}
	})
	text := []byte(`{"text":"` + strings.Repeat("x", 60<<10) + `"}`)
	for range fill {
		if _, err := filler.send(ctx, irisv1.TypeMessageSend, "default", text); err != nil {
			return "", err
		}
		select {
		case <-idle:
		case <-time.After(30 * time.Second):
			return "", fmt.Errorf("no agent.idle for a filler message")
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	fl, err := dialRaw(ctx, g.url, "flooder")
	if err != nil {
		return "", err
	}
	defer fl.ws.CloseNow() // it never reads: no serve, no close to wait for
	sent := 0
	for ; sent < n; sent++ {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := fl.sendID(wctx, int64(100+sent), irisv1.TypeSync, "", []byte(`{"cursor":0}`))
		cancel()
		if err != nil {
			break
		}
	}
	held := time.After(hold) // the flooder stays, unread, a moment
	select {
	case <-held:
	case <-ctx.Done():
	}
	if sent < n {
		return fmt.Sprintf("%s of %s syncs written before the gateway closed the flooder", commas(int64(sent)), commas(int64(n))), nil
	}
	return fmt.Sprintf("all %s syncs written", commas(int64(n))), nil
}

// floodSend sends n messages into the default lane without waiting.
func floodSend(ctx context.Context, g *subGateway, n int) (string, error) {
	d, err := dialRaw(ctx, g.url, "sender")
	if err != nil {
		return "", err
	}
	defer d.close()
	var accepted, refused atomic.Int64
	answered := make(chan struct{}, n)
	d.serve(func(b []byte) {
		id := frameID(b)
		if id < 100 {
			return
		}
		switch string(frameType(b)) {
		case irisv1.TypeMessage:
			accepted.Add(1)
		case irisv1.TypeError:
			refused.Add(1)
		default:
			return
		}
		answered <- struct{}{}
	})
	for i := range n {
		if err := d.sendID(ctx, int64(100+i), irisv1.TypeMessageSend, "default", fmt.Appendf(nil, `{"text":"flood %d"}`, i)); err != nil {
			return "", err
		}
	}
	deadline := time.After(90 * time.Second)
	for range n {
		select {
		case <-answered:
		case <-deadline:
			return fmt.Sprintf("%d accepted, %d refused, the rest unanswered after 90 s", accepted.Load(), refused.Load()), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return fmt.Sprintf("%s queued, %s refused", commas(accepted.Load()), commas(refused.Load())), nil
}

// floodPreHello opens WebSockets from 127.0.0.2 that never say hello, 64
// at a time, for dur or until limit are open; meanwhile a legitimate
// device connects every 200 ms.
func floodPreHello(ctx context.Context, g *subGateway, dur time.Duration, limit int) (string, error) {
	fctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	var (
		mu     sync.Mutex
		socks  []*websocket.Conn
		dialed atomic.Int64
		closed atomic.Int64 // told by the gateway (an error frame) it is closed
		wg     sync.WaitGroup
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for fctx.Err() == nil && dialed.Add(1) <= int64(limit) {
				ws, _, err := websocket.Dial(fctx, g.url, &websocket.DialOptions{HTTPClient: hc})
				if err != nil {
					continue
				}
				go func() {
					if _, _, err := ws.Read(context.Background()); err == nil {
						closed.Add(1) // the gateway says why it closes it, then closes it
					}
				}()
				mu.Lock()
				socks = append(socks, ws)
				mu.Unlock()
			}
		}()
	}
	var legit []time.Duration
	failed := 0
	t := time.NewTicker(200 * time.Millisecond)
	for fctx.Err() == nil {
		select {
		case <-t.C:
		case <-fctx.Done():
		}
		start := time.Now()
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		dv, err := dialRaw(lctx, g.url, "legit")
		lcancel()
		if err != nil {
			failed++
			continue
		}
		legit = append(legit, time.Since(start))
		dv.ws.CloseNow()
	}
	t.Stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	n := closed.Load()
	for _, ws := range socks {
		ws.CloseNow()
	}
	return fmt.Sprintf("%s opened, %s closed by the gateway meanwhile; legitimate connect+hello %d ok (max %s), %d failed",
		commas(int64(len(socks))), commas(n), len(legit), ms(pct(sortDur(legit), 1)), failed), nil
}

func sortDur(d []time.Duration) []time.Duration {
	out := append([]time.Duration(nil), d...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// floodMobileFrames has n Hermes Mobile phones each send 15 MiB of a frame
// and stop there.
func floodMobileFrames(ctx context.Context, g *subGateway, n int, hold time.Duration) (string, error) {
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	var socks []*websocket.Conn
	defer func() {
		for _, ws := range socks {
			ws.CloseNow()
		}
	}()
	var written atomic.Int64
	for i := range n {
		ws, _, err := websocket.Dial(ctx, g.url, nil)
		if err != nil {
			return "", err
		}
		socks = append(socks, ws)
		hello, _ := json.Marshal(map[string]any{"t": "hello", "token": Token,
			"device": map[string]any{"id": fmt.Sprint("flood-", i), "name": "flood", "platform": "android", "app_version": "1"}})
		if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
			return "", err
		}
		if _, data, err := ws.Read(ctx); err != nil || !bytes.Contains(data, []byte(`"ready"`)) {
			return "", fmt.Errorf("phone %d: no ready (%v, %.100s)", i, err, data)
		}
		w, err := ws.Writer(ctx, websocket.MessageText)
		if err != nil {
			return "", err
		}
		go func() {
			w.Write([]byte(`{"t":"text","id":"x","text":"`))
			for range 15 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				written.Add(1)
			}
		}()
	}
	select { // the frames stay unfinished a while
	case <-time.After(hold):
	case <-ctx.Done():
	}
	return fmt.Sprintf("%d phones, %s MiB of unfinished frames written (the rest waits in their sockets)", n, commas(written.Load())), nil
}

// floodUploads starts 8 uploads (1 MiB declared, no bytes) under each of
// ids device ids, all with the one token.
func floodUploads(ctx context.Context, g *subGateway, ids int) (string, error) {
	accepted, refused := 0, 0
	for i := range ids {
		d, err := dialRaw(ctx, g.url, fmt.Sprint("uploader-", i))
		if err != nil {
			return "", err
		}
		errs := map[int64]bool{}
		var mu sync.Mutex
		pong := make(chan struct{}, 1)
		d.serve(func(b []byte) {
			switch string(frameType(b)) {
			case irisv1.TypeError:
				mu.Lock()
				errs[frameID(b)] = true
				mu.Unlock()
			case irisv1.TypePong:
				pong <- struct{}{}
			}
		})
		var starts []int64
		for k := range 8 {
			id, err := d.send(ctx, irisv1.TypeMediaUploadStart, "", fmt.Appendf(nil,
				`{"media_ref":"r%d","kind":"document","mime":"application/octet-stream","size":%d,"filename":"f%d.bin"}`, k, 1<<20, k))
			if err != nil {
				return "", err
			}
			starts = append(starts, id)
		}
		if _, err := d.send(ctx, irisv1.TypePing, "", []byte(`{}`)); err != nil {
			return "", err
		}
		select {
		case <-pong:
		case <-time.After(10 * time.Second):
			return "", fmt.Errorf("no pong from the uploads' gateway")
		}
		mu.Lock()
		for _, id := range starts {
			if errs[id] {
				refused++
			} else {
				accepted++
			}
		}
		mu.Unlock()
		defer d.close() // their uploads stay unfinished until the end
	}
	files := 0
	filepath.WalkDir(filepath.Join(g.dir, "media"), func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			files++
		}
		return nil
	})
	return fmt.Sprintf("%d started, %d refused; %d partial files on disk", accepted, refused, files), nil
}
