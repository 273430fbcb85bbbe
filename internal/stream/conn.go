package stream

import (
	"context"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/feed"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// conn is one WebSocket client. Its run goroutine (started by the HTTP
// handler, which returns once the connection is hijacked) owns the
// connection: it waits for the subscribe, then hands the
// client to the feed, which writes everything and hands client frames
// back to conn (Receive) between writes. A small reader goroutine only
// reads raw frames and hands them over, so its stack stays small on an
// idle connection.
//
// conn is the feed's transport: Write, Flush, Heartbeat, Close, Kill,
// Gone, and, as a Receiver, Inbox and Receive.
type conn struct {
	s          *Server
	ws         *websocket.Conn
	bc         *batchConn // under ws: holds a batch until Flush
	sid        string
	in         chan feed.Inbound // reader → run: raw client frames
	done       chan struct{}     // closed when the reader stops
	f          *feed.Feed
	subscribed bool

	rctx       context.Context // the reader's; cancelling it tears a reading conn down
	stopReader context.CancelFunc
}

// inQueue bounds client frames read ahead of the run goroutine; past it
// the reader waits, which slows a client that floods the server.
const inQueue = 4

func newConn(s *Server, ws *websocket.Conn, bc *batchConn, sid string) *conn {
	c := &conn{s: s, ws: ws, bc: bc, sid: sid, in: make(chan feed.Inbound, inQueue), done: make(chan struct{})}
	c.rctx, c.stopReader = context.WithCancel(context.Background())
	c.f = feed.New(c, "websocket", sid, feed.Config{PingInterval: s.cfg.PingInterval, PingMisses: s.cfg.PingMisses,
		WriteTimeout: s.cfg.WriteTimeout, OverflowGrace: s.cfg.OverflowGrace, Logger: s.log, Metrics: s.m})
	return c
}

// run owns the connection until it closes.
func (c *conn) run() {
	c.ws.SetReadLimit(protocol.MaxClientFrame)
	go c.read(c.rctx)
	defer func() {
		c.stopReader()
		_ = c.ws.CloseNow()
		<-c.done
		c.f.Stop()
	}()
	if att := c.subscribe(c.rctx); att != nil {
		c.f.Serve(c.rctx, c.s.hub, att, c.s.clients.Shutdown())
	}
}

// subscribe handles client frames until a subscribe is accepted, and
// returns the attachment; nil if the connection ended first.
func (c *conn) subscribe(ctx context.Context) *hub.Attachment {
	timeout := time.NewTimer(c.s.cfg.SubscribeTimeout)
	defer timeout.Stop()
	for {
		select {
		case in := <-c.in:
			sub, ok := c.handle(ctx, in)
			if !ok {
				return nil
			}
			if sub == nil {
				continue
			}
			att, serr := c.s.hub.Subscribe(c.s.clients.Context(), c.sid, sub)
			if serr != nil {
				// The connection stays open: the client may subscribe again
				// (with a fixed filter, or snapshot: true).
				if !c.f.Send("", protocol.Marshal(serr)) {
					return nil
				}
				continue
			}
			c.subscribed = true
			return att
		case <-timeout.C:
			c.f.Close(protocol.ClosePolicyViolation, protocol.ReasonSubscribeTimeout)
			return nil
		case <-c.done:
			return nil
		case <-c.s.clients.Shutdown():
			c.f.Close(protocol.CloseGoingAway, protocol.ReasonShutdown)
			return nil
		}
	}
}

// Write sends one text frame, held with the rest of the batch until
// Flush (see batchConn). Writes use a background context, so a write
// costs no context or timer allocation (coder/websocket arms its own
// timeout only for cancellable contexts); the feed's deadline kills the
// connection instead.
func (c *conn) Write(_ string, frame []byte) error {
	c.bc.hold()
	return c.ws.Write(context.Background(), websocket.MessageText, frame)
}

// Flush sends the batch's frames.
func (c *conn) Flush() error { return c.bc.release() }

// Heartbeat sends a ping frame (spec §3.8); any pong answers it.
func (c *conn) Heartbeat(nonce string) error {
	return c.Write("", protocol.Marshal(protocol.Heartbeat{Type: protocol.TypePing, Nonce: nonce}))
}

// Close performs the close handshake with the code and the reason's
// JSON, cut to 123 bytes.
func (c *conn) Close(code int, reason protocol.CloseDetail) error {
	if err := c.bc.release(); err != nil {
		return err
	}
	return c.ws.Close(websocket.StatusCode(code), reason.Encode())
}

// Kill tears the connection down at once, from any goroutine, even
// while a close handshake is under way (the library's CloseNow is a
// no-op then, but cancelling the reader's context closes a connection
// it is reading).
func (c *conn) Kill() {
	c.stopReader()
	_ = c.ws.CloseNow()
}

// Gone is closed when the reader stops: the client closed or dropped
// the connection.
func (c *conn) Gone() <-chan struct{} { return c.done }

// Inbox delivers the client's frames to the feed.
func (c *conn) Inbox() <-chan feed.Inbound { return c.in }

// Receive handles a client frame of a subscribed connection.
func (c *conn) Receive(ctx context.Context, in feed.Inbound) bool {
	_, ok := c.handle(ctx, in)
	return ok
}
