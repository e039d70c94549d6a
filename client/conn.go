// Package client speaks Iris v1 to an irisgate (or any Iris gateway).
//
// Dial opens one authenticated connection; Client keeps one alive,
// reconnecting with backoff and catching up with sync after each
// reconnect, so a caller sees every durable frame at least once.
//
//	c, err := client.Dial(ctx, "ws://localhost:8787/ws", client.Options{Token: tok, DeviceID: "laptop"})
//	if err != nil { … }
//	defer c.Close()
//	reply, err := c.Request(ctx, "message.send", client.Lane{ChatID: "default"}, map[string]any{"text": "hi"})
//	for f := range c.Events() { … } // echo, read.receipt, message.start/update/stop…
//
// A Conn is safe for concurrent use. Its Events channel must be read: when
// it is full the connection stops reading from the socket (and the gateway
// eventually drops a device that reads too slowly).
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
)

// Lane addresses a channel's flat lane (ThreadID empty) or a thread.
type Lane struct {
	ChatID   string
	ThreadID string
}

// Frame is one Iris frame as received.
type Frame struct {
	V        int             `json:"v"`
	ID       int64           `json:"id,omitempty"`
	Type     string          `json:"type"`
	ChatID   string          `json:"chat_id,omitempty"`
	ThreadID string          `json:"thread_id,omitempty"`
	Cursor   int64           `json:"cursor,omitempty"`
	Payload  json.RawMessage `json:"payload"`
	// Raw is the frame exactly as it arrived; Binary frames have only Raw.
	Raw    []byte `json:"-"`
	Binary bool   `json:"-"`
}

// Decode unmarshals the payload into v.
func (f Frame) Decode(v any) error { return json.Unmarshal(f.Payload, v) }

// ServerError is an error frame answering a request.
type ServerError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *ServerError) Error() string { return e.Code + ": " + e.Message }

// Options configure a connection.
type Options struct {
	Token      string
	DeviceID   string
	DeviceName string
	FCMToken   string
	NtfyTopic  string
	// Header is sent with the WebSocket handshake.
	Header http.Header
	// EventBuffer is the Events channel's capacity (default 1024).
	EventBuffer int
	// ReadLimit bounds one incoming frame (default 16 MiB).
	ReadLimit int64
}

// Welcome is the hello.ack payload.
type Welcome struct {
	ServerCaps       map[string]any    `json:"server_caps"`
	SyncCursor       int64             `json:"sync_cursor"`
	LastPushedCursor int64             `json:"last_pushed_cursor"`
	Channels         []json.RawMessage `json:"channels"`
}

// Conn is one authenticated connection.
type Conn struct {
	ws      *websocket.Conn
	welcome Welcome
	events  chan Frame
	nextID  atomic.Int64
	wmu     sync.Mutex // one writer at a time

	mu      sync.Mutex
	waiters map[int64]chan Frame
	err     error
	done    chan struct{}
}

// ErrClosed is returned once the connection has ended.
var ErrClosed = errors.New("client: connection closed")

// Dial connects, says hello and waits for hello.ack. An error frame in
// answer to hello is returned as a *ServerError.
func Dial(ctx context.Context, url string, o Options) (*Conn, error) {
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: o.Header})
	if err != nil {
		return nil, err
	}
	if o.ReadLimit == 0 {
		o.ReadLimit = 16 << 20
	}
	ws.SetReadLimit(o.ReadLimit)
	if o.EventBuffer == 0 {
		o.EventBuffer = 1024
	}
	c := &Conn{ws: ws, events: make(chan Frame, o.EventBuffer), waiters: make(map[int64]chan Frame), done: make(chan struct{})}
	hello := map[string]any{"token": o.Token, "device_id": o.DeviceID, "device_name": o.DeviceName,
		"caps": map[string]any{"min_protocol": 1, "media": true}}
	if o.FCMToken != "" {
		hello["fcm_token"] = o.FCMToken
	}
	if o.NtfyTopic != "" {
		hello["ntfy_topic"] = o.NtfyTopic
	}
	if err := c.write(ctx, "hello", 1, Lane{}, hello); err != nil {
		ws.CloseNow()
		return nil, err
	}
	f, err := c.readFrame(ctx)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("client: waiting for hello.ack: %w", err)
	}
	switch f.Type {
	case "hello.ack":
	case "error":
		ws.CloseNow()
		var se ServerError
		f.Decode(&se)
		return nil, &se
	default:
		ws.CloseNow()
		return nil, fmt.Errorf("client: expected hello.ack, got %q", f.Type)
	}
	if err := f.Decode(&c.welcome); err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("client: bad hello.ack: %w", err)
	}
	c.nextID.Store(1)
	go c.readLoop()
	return c, nil
}

// Welcome returns the hello.ack payload.
func (c *Conn) Welcome() Welcome { return c.welcome }

// Events delivers every frame received after hello.ack, replies included,
// in order. It is closed when the connection ends.
func (c *Conn) Events() <-chan Frame { return c.events }

// Done is closed when the connection has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection normally.
func (c *Conn) Close() error {
	return c.ws.Close(websocket.StatusNormalClosure, "")
}

// CloseNow drops the connection without a closing handshake.
func (c *Conn) CloseNow() error { return c.ws.CloseNow() }

// Request sends a request with a fresh id and waits for the frame that
// answers it (an error frame becomes a *ServerError). For sync the answer
// is sync.done, which arrives after the replayed frames.
func (c *Conn) Request(ctx context.Context, typ string, lane Lane, payload any) (Frame, error) {
	id := c.nextID.Add(1)
	ch := make(chan Frame, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return Frame{}, err
	}
	c.waiters[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, id)
		c.mu.Unlock()
	}()
	if err := c.write(ctx, typ, id, lane, payload); err != nil {
		return Frame{}, err
	}
	select {
	case f := <-ch:
		if f.Type == "error" {
			var se ServerError
			f.Decode(&se)
			return f, &se
		}
		return f, nil
	case <-c.done:
		return Frame{}, c.Err()
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	}
}

// Send sends a frame without an id (no answer is awaited).
func (c *Conn) Send(ctx context.Context, typ string, lane Lane, payload any) error {
	return c.write(ctx, typ, 0, lane, payload)
}

// SendRaw sends bytes as they are, as a text frame (or binary when binary
// is set): for tests of malformed input and for media.
func (c *Conn) SendRaw(ctx context.Context, data []byte, binary bool) error {
	typ := websocket.MessageText
	if binary {
		typ = websocket.MessageBinary
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.Write(ctx, typ, data)
}

func (c *Conn) write(ctx context.Context, typ string, id int64, lane Lane, payload any) error {
	if payload == nil {
		payload = struct{}{}
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	data, err := json.Marshal(Frame{V: 1, ID: id, Type: typ, ChatID: lane.ChatID, ThreadID: lane.ThreadID, Payload: p})
	if err != nil {
		return err
	}
	return c.SendRaw(ctx, data, false)
}

func (c *Conn) readFrame(ctx context.Context) (Frame, error) {
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return Frame{}, err
	}
	if typ == websocket.MessageBinary {
		return Frame{Raw: data, Binary: true}, nil
	}
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		return Frame{}, fmt.Errorf("client: malformed frame from server: %w", err)
	}
	f.Raw = data
	return f, nil
}

func (c *Conn) readLoop() {
	var err error
	defer func() {
		c.mu.Lock()
		if err == nil {
			err = ErrClosed
		}
		c.err = err
		c.mu.Unlock()
		close(c.done)
		close(c.events)
	}()
	for {
		var f Frame
		f, err = c.readFrame(context.Background())
		if err != nil {
			return
		}
		if f.ID != 0 {
			c.mu.Lock()
			w := c.waiters[f.ID]
			c.mu.Unlock()
			if w != nil && isAnswer(f.Type) {
				select {
				case w <- f:
				default:
				}
			}
		}
		c.events <- f
	}
}

// isAnswer tells a request's final answer from frames that carry its id on
// the way (the media.pull header comes before the bytes and its end frame).
func isAnswer(typ string) bool { return typ != "media.pull" }
