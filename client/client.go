package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// Client keeps a device connected: it dials, catches up with sync from
// the last cursor it saw, and on any drop reconnects with backoff.
// Frames from all its connections arrive on one Events channel.
type Client struct {
	url  string
	opts Options
	// OnState, when set, is told of each connect (err nil) and drop.
	OnState func(connected bool, err error)

	events chan Frame
	mu     sync.Mutex
	conn   *Conn
	cursor int64
	synced bool          // the cursor is a real position, not "never connected"
	ready  chan struct{} // closed while connected; replaced on drop
}

// New makes a client; Run connects it. cursor is where the device's last
// session left off (0: a new device, which starts at the current head
// instead of replaying the whole outbox).
func New(url string, o Options, cursor int64) *Client {
	return &Client{url: url, opts: o, cursor: cursor, synced: cursor > 0, events: make(chan Frame, 1024), ready: make(chan struct{})}
}

// Events delivers frames from every connection, in order per connection.
func (c *Client) Events() <-chan Frame { return c.events }

// Cursor is the outbox position the client has caught up to.
func (c *Client) Cursor() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cursor
}

// Conn waits until the client is connected and returns the connection.
func (c *Client) Conn(ctx context.Context) (*Conn, error) {
	for {
		c.mu.Lock()
		conn, ready := c.conn, c.ready
		c.mu.Unlock()
		if conn != nil {
			return conn, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Request sends a request on the current connection, waiting for one.
func (c *Client) Request(ctx context.Context, typ irisv1.FrameType, lane Lane, payload any) (Frame, error) {
	conn, err := c.Conn(ctx)
	if err != nil {
		return Frame{}, err
	}
	return conn.Request(ctx, typ, lane, payload)
}

// Run connects and reconnects until ctx ends; it returns ctx's error, or
// an auth error, which retrying cannot fix.
func (c *Client) Run(ctx context.Context) error {
	defer close(c.events)
	backoff := 250 * time.Millisecond
	for {
		err := c.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var se *ServerError
		if errors.As(err, &se) && se.Code == irisv1.CodeAuth {
			return err
		}
		if c.OnState != nil {
			c.OnState(false, err)
		}
		// Full jitter, so a thousand devices dropped together do not come
		// back together.
		d := time.Duration(rand.Int64N(int64(backoff))) + 50*time.Millisecond
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(backoff*2, 30*time.Second)
		if err == nil {
			backoff = 250 * time.Millisecond
		}
	}
}

// session runs one connection: hello, sync, then relaying its frames.
func (c *Client) session(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	conn, err := Dial(dctx, c.url, c.opts)
	cancel()
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	c.mu.Lock()
	first := !c.synced
	from := c.cursor
	if first {
		// A new device starts at the head: the past is history's job.
		c.cursor = conn.HelloAck().SyncCursor
		c.synced = true
	}
	c.conn = conn
	close(c.ready)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.conn = nil
		c.ready = make(chan struct{})
		c.mu.Unlock()
	}()
	if c.OnState != nil {
		c.OnState(true, nil)
	}
	syncErr := make(chan error, 1)
	if !first {
		go func() {
			f, err := conn.Request(ctx, irisv1.TypeSync, Lane{}, irisv1.Sync{Cursor: from})
			if err == nil {
				var done irisv1.SyncDone
				if done, err = Payload[irisv1.SyncDone](f); err == nil {
					c.advance(done.Cursor)
				}
			}
			syncErr <- err
		}()
	}
	for f := range conn.Events() {
		if f.Cursor > 0 {
			c.advance(f.Cursor)
		}
		select {
		case c.events <- f:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return conn.Err()
}

func (c *Client) advance(cursor int64) {
	c.mu.Lock()
	if cursor > c.cursor {
		c.cursor = cursor
	}
	c.mu.Unlock()
}
