package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// rawDev is a lean simulated device: it speaks Iris over a bare WebSocket
// (lightws.go) and looks at the frames it receives with a few byte searches
// instead of decoding them, so that on a small machine the gateway, not
// the simulated devices, gets the CPU. (The client package decodes every
// frame twice; scenarios that test its reconnect logic use it instead.)
type rawDev struct {
	id         string
	ws         wsConn
	syncCursor int64
	nextID     atomic.Int64

	wmu  sync.Mutex
	done chan struct{}
	err  error // why the read loop ended; read after done
}

// dialRaw connects a device and waits for its hello.ack.
func dialRaw(ctx context.Context, url, deviceID string) (*rawDev, error) {
	d, _, _, err := dialRawOpts(ctx, url, deviceID, nil)
	return d, err
}

// dialRawOpts is dialRaw with the WebSocket's dial options (nil for the
// defaults); it also returns the upgrade response and the hello.ack.
func dialRawOpts(ctx context.Context, url, deviceID string, opts *websocket.DialOptions) (*rawDev, *http.Response, irisv1.HelloAck, error) {
	var ack irisv1.HelloAck
	ws, resp, err := dialWS(ctx, url, opts)
	if err != nil {
		return nil, resp, ack, err
	}
	d := &rawDev{id: deviceID, ws: ws, done: make(chan struct{})}
	hello, err := irisv1.Marshal(irisv1.Envelope{V: irisv1.Version, Type: irisv1.TypeHello},
		irisv1.Hello{Token: Token, DeviceID: deviceID, DeviceName: deviceID, Caps: irisv1.HelloCaps{MinProtocol: irisv1.Version}})
	if err != nil {
		ws.CloseNow()
		return nil, resp, ack, err
	}
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		ws.CloseNow()
		return nil, resp, ack, err
	}
	_, data, err := ws.Read(ctx)
	if err != nil {
		ws.CloseNow()
		return nil, resp, ack, fmt.Errorf("waiting for hello.ack: %w", err)
	}
	var env irisv1.Envelope
	if json.Unmarshal(data, &env) != nil || env.Type != irisv1.TypeHelloAck || json.Unmarshal(env.Payload, &ack) != nil {
		ws.CloseNow()
		return nil, resp, ack, fmt.Errorf("expected hello.ack, got %.200s", data)
	}
	d.syncCursor = ack.SyncCursor
	return d, resp, ack, nil
}

// dialWS opens a device's WebSocket: the bench's light client (lightws.go)
// for the defaults, coder/websocket's for any option (compression).
func dialWS(ctx context.Context, url string, opts *websocket.DialOptions) (wsConn, *http.Response, error) {
	if opts == nil {
		lc, resp, err := lightDial(ctx, url)
		if err != nil {
			return nil, resp, err
		}
		lc.SetReadLimit(64 << 20)
		return lc, resp, nil
	}
	ws, resp, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, resp, err
	}
	ws.SetReadLimit(64 << 20)
	return ws, resp, nil
}

// serve reads frames until the connection ends, calling fn with each text
// frame (the slice is reused: fn must not keep it).
func (d *rawDev) serve(fn func(data []byte)) {
	if lc, ok := d.ws.(*lightConn); ok {
		go func() {
			defer close(d.done)
			d.err = lc.each(func(typ websocket.MessageType, p []byte) {
				if typ == websocket.MessageText && fn != nil {
					fn(p)
				}
			})
		}()
		return
	}
	go func() {
		var buf bytes.Buffer
		defer close(d.done)
		for {
			typ, r, err := d.ws.Reader(context.Background())
			if err != nil {
				d.err = err
				return
			}
			buf.Reset()
			if _, err := buf.ReadFrom(r); err != nil {
				d.err = err
				return
			}
			if typ == websocket.MessageText && fn != nil {
				fn(buf.Bytes())
			}
		}
	}()
}

// newID returns a fresh request id.
func (d *rawDev) newID() int64 { return d.nextID.Add(1) + 1 } // hello was 1

// send writes a request; payload is its JSON. It returns the request id.
func (d *rawDev) send(ctx context.Context, typ, chatID string, payload []byte) (int64, error) {
	id := d.newID()
	return id, d.sendID(ctx, id, typ, chatID, payload)
}

// sendID writes a request with a given id.
func (d *rawDev) sendID(ctx context.Context, id int64, typ, chatID string, payload []byte) error {
	b := make([]byte, 0, 96+len(payload))
	b = append(b, `{"v":1,"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	if chatID != "" {
		b = append(b, `,"chat_id":`...)
		b = strconv.AppendQuote(b, chatID)
	}
	b = append(b, `,"payload":`...)
	b = append(b, payload...)
	b = append(b, '}')
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.ws.Write(ctx, websocket.MessageText, b)
}

func (d *rawDev) close() {
	d.ws.CloseNow()
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
	}
}

// dialMany connects n devices, at most par at a time.
func dialMany(ctx context.Context, url string, n, par int, name func(i int) string) ([]*rawDev, error) {
	return dialManyWith(ctx, url, n, par, name, dialRaw)
}

// dialManyWith is dialMany connecting each device with dial.
func dialManyWith(ctx context.Context, url string, n, par int, name func(i int) string, dial func(ctx context.Context, url, id string) (*rawDev, error)) ([]*rawDev, error) {
	devs := make([]*rawDev, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			d, err := dial(dctx, url, name(i))
			if err != nil {
				errs <- fmt.Errorf("device %s: %w", name(i), err)
				return
			}
			devs[i] = d
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		for _, d := range devs {
			if d != nil {
				d.ws.CloseNow()
			}
		}
		return nil, err
	}
	return devs, nil
}

// closeAll drops every device.
func closeAll(devs []*rawDev) {
	for _, d := range devs {
		if d != nil {
			d.ws.CloseNow()
		}
	}
	for _, d := range devs {
		if d != nil {
			d.close()
		}
	}
}

// Frame inspection by byte search. The gateway writes envelopes in a fixed
// field order: {"v":1,"id":…,"type":"…","chat_id":"…","thread_id":"…",
// "cursor":…,"payload":{…}}.

var (
	keyType      = []byte(`"type":"`)
	keyID        = []byte(`{"v":1,"id":`)
	keyCursor    = []byte(`"cursor":`)
	keyText      = []byte(`"text":"`)
	keyMessageID = []byte(`"message_id":"`)
	keyChatID    = []byte(`"chat_id":"`)
)

// frameType returns the frame's type.
func frameType(b []byte) []byte { return stringAfter(b, keyType) }

// frameID returns the request id the frame answers, 0 for none.
func frameID(b []byte) int64 {
	if !bytes.HasPrefix(b, keyID) {
		return 0
	}
	n, _ := leadingInt(b[len(keyID):])
	return n
}

// envCursor returns the envelope's cursor (replayed frames), 0 for none.
func envCursor(b []byte) int64 {
	i := bytes.Index(b, keyCursor)
	p := bytes.Index(b, []byte(`"payload":`))
	if i < 0 || (p >= 0 && i > p) {
		return 0
	}
	n, _ := leadingInt(b[i+len(keyCursor):])
	return n
}

// payloadCursor returns a sync.done's cursor.
func payloadCursor(b []byte) int64 {
	p := bytes.Index(b, []byte(`"payload":`))
	if p < 0 {
		return 0
	}
	i := bytes.Index(b[p:], keyCursor)
	if i < 0 {
		return 0
	}
	n, _ := leadingInt(b[p+i+len(keyCursor):])
	return n
}

// textLen returns the length of a message.update's text (the benchmark's
// texts need no escaping).
func textLen(b []byte) int {
	i := bytes.Index(b, keyText)
	if i < 0 {
		return -1
	}
	return bytes.IndexByte(b[i+len(keyText):], '"')
}

func messageID(b []byte) []byte { return stringAfter(b, keyMessageID) }

func chatID(b []byte) []byte { return stringAfter(b, keyChatID) }

func stringAfter(b, key []byte) []byte {
	i := bytes.Index(b, key)
	if i < 0 {
		return nil
	}
	rest := b[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil
	}
	return rest[:j]
}

func leadingInt(b []byte) (int64, bool) {
	var n int64
	k := 0
	for k < len(b) && b[k] >= '0' && b[k] <= '9' {
		n = n*10 + int64(b[k]-'0')
		k++
	}
	return n, k > 0
}
