package stream

import (
	"context"
	"errors"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// conn is one WebSocket client. Its run goroutine (the HTTP handler's)
// owns the connection: it decodes and answers client frames and is the
// only writer. A small reader goroutine only reads raw frames and hands
// them over, so its stack stays small on an idle connection.
type conn struct {
	s      *Server
	ws     *websocket.Conn
	sid    string
	in     chan frameIn  // reader → run: raw client frames
	done   chan struct{} // closed when the reader stops
	client *hub.Client   // set once subscribed
	hb     heartbeat
	w      *writer

	rctx       context.Context // the reader's; cancelling it tears a reading conn down
	stopReader context.CancelFunc
	closed     bool // a close was attempted (run goroutine only)
}

// frameIn is one client frame as read.
type frameIn struct {
	typ  websocket.MessageType
	data []byte
}

// inQueue bounds client frames read ahead of the run goroutine; past it
// the reader waits, which slows a client that floods the server.
const inQueue = 4

func newConn(s *Server, ws *websocket.Conn, sid string) *conn {
	c := &conn{s: s, ws: ws, sid: sid, in: make(chan frameIn, inQueue), done: make(chan struct{})}
	c.rctx, c.stopReader = context.WithCancel(context.Background())
	c.w = newWriter(ws, s.cfg.WriteTimeout, c.kill)
	c.hb.misses = s.cfg.PingMisses
	return c
}

// run owns the connection until it closes.
func (c *conn) run() {
	ws := c.ws
	ws.SetReadLimit(protocol.MaxClientFrame)
	rctx := c.rctx
	go c.read(rctx)
	defer func() {
		c.stopReader()
		_ = ws.CloseNow()
		<-c.done
		c.w.stop()
		if c.client != nil {
			c.s.hub.Unsubscribe(c.client)
			if c.s.m != nil {
				c.s.m.Clients.Dec()
			}
		}
	}()

	if c.subscribe(rctx) {
		c.live(rctx)
	}
	if c.w.hurried.Load() {
		c.closeTooSlow()
	}
}

// kill tears the connection down at once, from any goroutine, even while
// a close handshake is under way (the library's CloseNow is a no-op then,
// but cancelling the reader's context closes a connection it is reading).
func (c *conn) kill() {
	c.stopReader()
	_ = c.ws.CloseNow()
}

// closeTooSlow ends an overflowed client (spec §10.5): the 1008
// client_too_slow close frame is tried within what is left of
// overflowGrace, then the connection is dropped either way.
func (c *conn) closeTooSlow() {
	if c.closed {
		return
	}
	if c.s.m != nil {
		c.s.m.SlowCloses.Inc()
	}
	c.close(protocol.ClosePolicyViolation, protocol.ReasonClientTooSlow)
}

// subscribe handles client frames until a subscribe is accepted, then
// writes the ack and the snapshot or replay. It reports false if the
// connection ended.
func (c *conn) subscribe(ctx context.Context) bool {
	timeout := time.NewTimer(c.s.cfg.SubscribeTimeout)
	defer timeout.Stop()
	for {
		select {
		case f := <-c.in:
			sub, ok := c.handle(ctx, f)
			if !ok {
				return false
			}
			if sub == nil {
				continue
			}
			att, serr := c.s.hub.Subscribe(c.s.ctx, c.sid, sub)
			if serr != nil {
				// The connection stays open: the client may subscribe again
				// (with a fixed filter, or snapshot: true).
				if !c.write(protocol.Marshal(serr)) {
					return false
				}
				continue
			}
			c.client = att.Client
			c.client.OnOverflow(c.w.hurry)
			if c.s.m != nil {
				c.s.m.Clients.Inc()
			}
			return c.writeAttachment(ctx, att)
		case <-timeout.C:
			c.close(protocol.ClosePolicyViolation, protocol.ReasonSubscribeTimeout)
			return false
		case <-c.done:
			return false
		case <-c.s.ctx.Done():
			c.close(protocol.CloseGoingAway, protocol.ReasonShutdown)
			return false
		}
	}
}

func (c *conn) writeAttachment(ctx context.Context, att *hub.Attachment) bool {
	if !c.write(protocol.Marshal(att.Ack)) {
		return false
	}
	if att.Snapshot != nil && !c.write(att.Snapshot) {
		return false
	}
	errWrite := errors.New("write failed")
	err := att.StreamReplayBatches(ctx, func(items []*hub.Item) error {
		if !c.writeBatch(items) {
			return errWrite
		}
		return nil
	})
	if err != nil && !errors.Is(err, errWrite) {
		c.s.log.Error("replay", "session", c.sid, "err", err)
	}
	return err == nil
}

// live drains the client's queue until the connection ends.
func (c *conn) live(ctx context.Context) {
	var batch []*hub.Item
	ticker := time.NewTicker(c.s.cfg.PingInterval)
	defer ticker.Stop()
	for {
		select {
		case <-c.client.Notify():
			var overflown bool
			batch, overflown = c.client.Drain(batch)
			if overflown {
				// An overflow hurried the writer already; a resync (a
				// lost event) marks the queue the same way without it.
				c.w.hurry()
				return // run closes it as too slow
			}
			if c.s.m != nil {
				c.s.m.QueueDepth.Observe(float64(len(batch)))
			}
			if !c.writeBatch(batch) {
				return
			}
		case f := <-c.in:
			if _, ok := c.handle(ctx, f); !ok {
				return
			}
		case <-ticker.C:
			switch c.hb.tick() {
			case hbDead:
				c.close(protocol.ClosePolicyViolation, protocol.ReasonHeartbeatTimeout)
				return
			case hbPing:
				if !c.w.write(protocol.Marshal(protocol.Heartbeat{Type: protocol.TypePing, Nonce: c.hb.nonce()})) {
					return
				}
			}
		case <-c.done:
			return
		case <-c.s.ctx.Done():
			if items, overflown := c.client.Drain(batch); !overflown {
				c.writeBatch(items) // flush what is queued before going away
			}
			c.close(protocol.CloseGoingAway, protocol.ReasonShutdown)
			return
		}
	}
}

// writeBatch writes queued items in order under one deadline (a batch
// that cannot go out within --write-timeout means the client stopped
// reading) and counts them.
func (c *conn) writeBatch(items []*hub.Item) bool {
	if len(items) == 0 {
		return true
	}
	c.hb.active()
	c.w.arm()
	defer c.w.disarm()
	var now time.Time
	for i, it := range items {
		if c.w.hurried.Load() || !c.w.raw(it.Frame) {
			c.countSent(i)
			return false
		}
		if c.s.m != nil && it.Type == "text.delta" {
			if now.IsZero() {
				now = time.Now()
			}
			c.s.m.DeltaLatency.Observe(now.Sub(it.TS).Seconds())
		}
	}
	c.countSent(len(items))
	return true
}

// write sends a control frame and counts it as activity.
func (c *conn) write(frame []byte) bool {
	c.hb.active()
	return c.w.write(frame)
}

func (c *conn) countSent(n int) {
	if c.s.m != nil && n > 0 {
		c.s.m.EventsSent.Add(float64(n))
	}
}

// close ends the connection with a code and a JSON reason.
func (c *conn) close(code websocket.StatusCode, reason protocol.CloseReason) {
	c.closed = true
	if c.s.m != nil {
		c.s.m.Closes.WithLabelValues(reason.Code).Inc()
	}
	err := c.w.close(code, reason.Encode())
	if err != nil && !errors.Is(err, context.Canceled) {
		c.s.log.Debug("close", "session", c.sid, "code", code, "err", err)
	}
}
