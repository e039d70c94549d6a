package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"syscall"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/wire"
	"github.com/irisgate/irisgate/wire/iris"
	"github.com/irisgate/irisgate/wire/mobile"
)

// The dialect seam: the server reads frames and hands them to the
// connection's dialect (wire.Dialect, wire.Session). Every frame the
// server sends of its own accord, errors included, is made by a dialect.

// newDialects makes the dialects, in the order a first frame is offered
// to them. Hermes Mobile comes first: its hello ("t":"hello") is its own
// even with a "type" member; and the close reason of a refusal made for
// every dialect at once (refuse) is the first's, Hermes Mobile's code
// auth_required, which names the problem for Iris as well.
func newDialects(cfg Config, gw *gateway.Gateway, auth *gateway.Auth, log *slog.Logger) []wire.Dialect {
	return []wire.Dialect{
		mobile.New(mobile.Config{GW: gw, Auth: auth, Log: log, MaxFrame: cfg.MobileMaxFrame, Settings: cfg.Mobile}),
		iris.NewDialect(iris.Config{GW: gw, Auth: auth, Log: log, Push: cfg.Push, PushNtfyServer: cfg.NtfyServer, VAPIDPublicKey: cfg.WebPushKey}, cfg.MaxFrame),
	}
}

// refuse is err's fatal frame in every dialect at once, for a connection
// that has not said which it speaks.
func (s *Server) refuse(err error) *wire.Fatal {
	fs := make([]*wire.Fatal, len(s.dialects))
	for i, d := range s.dialects {
		fs[i] = d.Refuse(err)
	}
	return wire.Bilingual(fs...)
}

// pick is the dialect of a first frame: the first that says it Is its
// hello, else the first it Looks like (nil: none).
func (s *Server) pick(first []byte) wire.Dialect {
	for _, d := range s.dialects {
		if d.Is(first) {
			return d
		}
	}
	for _, d := range s.dialects {
		if d.Looks(first) {
			return d
		}
	}
	return nil
}

// open authenticates the first frame in the dialect it picks. ok is
// false when the connection was closed.
func (s *Server) open(ctx context.Context, c *websocket.Conn, p wire.Peer, first []byte) (wire.Session, wire.Dialect, bool) {
	d := s.pick(first)
	if d == nil {
		c.Close(websocket.StatusPolicyViolation, "the first frame must be a hello")
		return nil, nil, false
	}
	sess, err := d.Open(ctx, p, first)
	if err != nil {
		var f *wire.Fatal
		if errors.As(err, &f) {
			s.writeRaw(c, f.Frame)
			c.Close(f.Status, f.Reason)
		} else {
			c.Close(websocket.StatusInternalError, "internal error")
		}
		return nil, nil, false
	}
	return sess, d, true
}

// hello reads and authenticates a connection's first frame, within the
// wait w (waitHello).
func (s *Server) hello(c *websocket.Conn, pr *prober, p wire.Peer, w *helloWait) (wire.Session, wire.Dialect, bool) {
	s.startHello(c, w)
	typ, first, release, err := readFrame(s.base, c, helloLimit, s.helloBudget, gateway.AddrKey(p.Addr), pr.stall)
	defer release()
	if !s.helloCame(w) {
		return nil, nil, false
	}
	if err != nil {
		if errors.Is(err, errTooBig) {
			c.Close(websocket.StatusMessageTooBig, "hello too large")
		}
		return nil, nil, false
	}
	if typ != websocket.MessageText {
		c.Close(websocket.StatusPolicyViolation, "the first frame must be a hello")
		return nil, nil, false
	}
	sess, d, ok := s.open(s.base, c, p, first)
	if ok {
		s.sawHello(p.Addr)
	}
	return sess, d, ok
}

// live is a connection after its hello, as begin set it up for serve.
type live struct {
	c    *websocket.Conn
	sock *corkedConn
	pr   *prober
	sess wire.Session
	d    wire.Dialect
	conn *hub.Conn
	w    *writer
	// token is registered in Server.tokens ("": not).
	token string
	// here: the writer due at once (the hello reply) is for the
	// goroutine that ran begin to run (first).
	here bool
}

// begin registers a connection that said hello and drives its writer.
func (s *Server) begin(c *websocket.Conn, sock *corkedConn, pr *prober, sess wire.Session, d wire.Dialect) *live {
	conn := sess.Conn()
	if d.Proofs() {
		pr.attach(conn)
		conn.TrackProofs()
	}
	pr.useSocket(sock) // every frame from now on is written on sock
	s.mu.Lock()
	if s.down {
		// Shutdown may have closed the live connections before this one
		// was registered.
		conn.Close(errGoingAway)
	}
	s.mu.Unlock()
	s.m.FramesIn.WithLabelValues(d.Name(), "hello").Inc()
	l := &live{c: c, sock: sock, pr: pr, sess: sess, d: d, conn: conn}
	if tok := sess.TokenID(); s.tokens.add(tok, conn, d) {
		l.token = tok
	}
	l.w = &writer{s: s, c: c, sock: sock, conn: conn, out: s.m.FramesOut.WithLabelValues(d.Name()), done: make(chan struct{})}
	if d.Proofs() {
		l.w.prober = pr
	}
	l.here = l.w.startHere()
	sock.rd.arm() // from now on the read loop idles outside reads
	return l
}

// first runs the writer begin left for this goroutine, if any.
func (l *live) first() {
	if l.here {
		l.w.drain()
	}
}

// serve is a connection's read loop after its hello; writers are started
// by the connection's queue when frames wait. When the device has sent
// everything it had (errIdle), serve hands the connection to a new
// goroutine that waits for more (await) and returns: the deep stack the
// reads grew goes with it (idle.go).
func (s *Server) serve(l *live) {
	ctx := s.base
	conn := l.conn
	var readErr error
	for {
		typ, data, release, err := readFrame(ctx, l.c, l.d.Limit(), s.budget, conn.Token, l.pr.stall)
		if err != nil {
			if errors.Is(err, errIdle) {
				go s.await(l)
				return
			}
			readErr = err
			if errors.Is(err, errTooBig) {
				l.sess.Settle()
				end(conn, l.d.TooBig())
			}
			// A close frame proves nothing: a peer that has sent Close may
			// drop the data frames that reach it afterwards (coder/websocket
			// does), so frames written before it stay unproven. Nor does
			// any other frame: see prober.
			break
		}
		// The replies the frame gets are written from here, after it
		// (hub.Conn.Hold): a round trip waits for no writer goroutine.
		conn.Hold()
		stop := s.handleFrame(ctx, conn, l.sess, l.d.Name(), typ, data)
		release()
		if conn.Release() {
			l.w.drain()
		}
		if stop {
			break
		}
	}
	l.sess.Close()
	s.gw.Disconnect(conn)
	if peerGone(readErr) {
		// The frames queued still go (a peer that only shut its side
		// down reads them), but no close handshake: a peer that is gone
		// answers none, and writing the Close and reading for its answer
		// was a tenth of a handshake's CPU in the handshake benchmark,
		// whose devices come and go.
		conn.Close(errPeerGone)
	} else {
		conn.Close(&closeErr{websocket.StatusNormalClosure, ""})
	}
	<-l.w.done
	if l.token != "" {
		s.tokens.remove(l.token, conn)
	}
	s.closed(l.c)
}

// await is an idle connection's one goroutine, started small: it waits
// until the device sends something, then reads on.
func (s *Server) await(l *live) {
	l.sock.rd.await()
	s.serve(l)
}

// errPeerGone closes a connection whose peer ended the TCP connection:
// the socket is closed once the frames queued are written, without a
// close handshake (writer.closeSocket).
var errPeerGone = errors.New("peer closed the connection")

// peerGone reports whether a read error says the peer closed or reset
// the TCP connection without a WebSocket close.
func peerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// end queues a Fatal's frame, then the close it asks for.
func end(conn *hub.Conn, f *wire.Fatal) {
	conn.Send(hub.Out{Data: f.Frame})
	conn.Close(&closeErr{f.Status, f.Reason})
}

// handleFrame handles one frame after the hello; true means the
// connection is closing.
func (s *Server) handleFrame(ctx context.Context, conn *hub.Conn, sess wire.Session, dialect string, typ websocket.MessageType, data []byte) bool {
	if typ == websocket.MessageBinary {
		s.m.FramesIn.WithLabelValues(dialect, "binary").Inc()
		s.safely(conn, sess, func() { sess.HandleBinary(ctx, data) })
		return false
	}
	var f *wire.Fatal
	s.safely(conn, sess, func() {
		var t string
		if t, f = sess.Handle(ctx, data); t != "" {
			s.m.FramesIn.WithLabelValues(dialect, t).Inc()
		}
	})
	if f != nil {
		end(conn, f)
		return true
	}
	return false
}

// safely runs one frame's handling; a panic is logged and answered with
// the dialect's internal error instead of taking the process down.
func (s *Server) safely(conn *hub.Conn, sess wire.Session, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic handling a frame", "device", conn.DeviceID, "panic", fmt.Sprint(p))
			conn.Send(hub.Out{Data: sess.InternalError()})
		}
	}()
	fn()
}

func (s *Server) writeRaw(c *websocket.Conn, data []byte) {
	ctx, cancel := context.WithTimeout(s.base, s.cfg.WriteTimeout)
	defer cancel()
	c.Write(ctx, websocket.MessageText, data)
}

var errTooBig = errors.New("frame too large")
