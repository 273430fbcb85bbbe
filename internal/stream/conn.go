package stream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// conn is one WebSocket client. Its run goroutine (the HTTP handler's) is
// the only writer of event frames; a reader goroutine decodes client
// frames and hands replies to the writer through ctrl.
type conn struct {
	s   *Server
	ws  *websocket.Conn
	sid string

	subs   chan *protocol.Subscribe // reader → writer: subscribe requests
	ctrl   chan []byte              // reader → writer: pongs and error frames
	done   chan struct{}            // closed when the reader stops
	client *hub.Client              // set once subscribed (writer goroutine only)
	hb     heartbeat
	w      writer

	// subMu orders the reader's hand-over of a subscribe with the
	// writer's attach: a subscribe handed over before the attach is
	// drained and refused by the writer, one read after it is refused by
	// the reader. Without it a second subscribe that arrived while the
	// first was being accepted was silently dropped.
	subMu    sync.Mutex
	attached bool
}

// ctrlQueue bounds replies waiting for the writer; a client that floods
// pings past it loses replies, not the connection.
const ctrlQueue = 32

func newConn(s *Server, ws *websocket.Conn, sid string) *conn {
	c := &conn{s: s, ws: ws, sid: sid,
		subs: make(chan *protocol.Subscribe, 1), ctrl: make(chan []byte, ctrlQueue), done: make(chan struct{})}
	c.w = newWriter(ws, s.cfg.WriteTimeout)
	c.hb.misses = s.cfg.PingMisses
	return c
}

// run owns the connection until it closes.
func (c *conn) run() {
	ws := c.ws
	ws.SetReadLimit(protocol.MaxClientFrame)
	rctx, stopReader := context.WithCancel(context.Background())
	go c.read(rctx)
	defer func() {
		stopReader()
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

	if c.subscribe() {
		c.live()
	}
}

// subscribe waits for subscribe frames until one is accepted, then
// writes the ack and the snapshot or replay. It reports false if the
// connection ended.
func (c *conn) subscribe() bool {
	timeout := time.NewTimer(c.s.cfg.SubscribeTimeout)
	defer timeout.Stop()
	for {
		select {
		case sub := <-c.subs:
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
			c.subMu.Lock()
			c.attached = true
			extra := 0
			for len(c.subs) > 0 {
				<-c.subs
				extra++
			}
			c.subMu.Unlock()
			if c.s.m != nil {
				c.s.m.Clients.Inc()
			}
			if !c.writeAttachment(att) {
				return false
			}
			for range extra {
				if !c.write(errorFrame(protocol.CodeAlreadySubscribe, alreadySubscribed)) {
					return false
				}
			}
			return true
		case f := <-c.ctrl:
			if !c.write(f) {
				return false
			}
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

func (c *conn) writeAttachment(att *hub.Attachment) bool {
	if !c.write(protocol.Marshal(att.Ack)) {
		return false
	}
	if att.Snapshot != nil && !c.write(att.Snapshot) {
		return false
	}
	for i := range att.Replay {
		if !c.writeItem(&att.Replay[i]) {
			return false
		}
	}
	return true
}

// live drains the client's queue until the connection ends.
func (c *conn) live() {
	var batch []hub.Item
	ticker := time.NewTicker(c.s.cfg.PingInterval)
	defer ticker.Stop()
	for {
		select {
		case <-c.client.Notify():
			var overflown bool
			batch, overflown = c.client.Drain(batch)
			if overflown {
				if c.s.m != nil {
					c.s.m.SlowCloses.Inc()
				}
				c.close(protocol.ClosePolicyViolation, protocol.ReasonClientTooSlow)
				return
			}
			if c.s.m != nil {
				c.s.m.QueueDepth.Observe(float64(len(batch)))
			}
			for i := range batch {
				if !c.writeItem(&batch[i]) {
					return
				}
			}
			clear(batch)
		case f := <-c.ctrl:
			if !c.write(f) {
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
			c.flush(&batch)
			c.close(protocol.CloseGoingAway, protocol.ReasonShutdown)
			return
		}
	}
}

// flush writes whatever is queued, for a clean shutdown.
func (c *conn) flush(batch *[]hub.Item) {
	items, overflown := c.client.Drain(*batch)
	if overflown {
		return
	}
	for i := range items {
		if !c.writeItem(&items[i]) {
			return
		}
	}
}

// write sends a control frame and counts it as activity.
func (c *conn) write(frame []byte) bool {
	c.hb.active()
	return c.w.write(frame)
}

func (c *conn) writeItem(it *hub.Item) bool {
	c.hb.active()
	if !c.w.write(it.Frame) {
		return false
	}
	if m := c.s.m; m != nil {
		m.EventsSent.Inc()
		if it.Type == "text.delta" {
			m.DeltaLatency.Observe(time.Since(it.TS).Seconds())
		}
	}
	return true
}

// close ends the connection with a code and a JSON reason.
func (c *conn) close(code websocket.StatusCode, reason protocol.CloseReason) {
	if c.s.m != nil {
		c.s.m.Closes.WithLabelValues(reason.Code).Inc()
	}
	err := c.w.close(code, reason.Encode())
	if err != nil && !errors.Is(err, context.Canceled) {
		c.s.log.Debug("close", "session", c.sid, "code", code, "err", err)
	}
}
