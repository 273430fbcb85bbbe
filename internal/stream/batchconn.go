package stream

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// coder/websocket writes each message with one write to the connection
// (its buffered writer is flushed at the end of every message), so a
// batch of 512 replayed events would be 512 system calls. The feed
// writes a batch and then flushes it (feed.Transport: Write may buffer
// until Flush), so the connection under the library holds what is
// written between the feed's first Write and its Flush and sends it in
// writes of up to batchBytes. Outside a batch (a pong the library sends
// on its own, the close handshake) writes go straight through; one the
// library makes during a batch leaves with the batch, at its Flush.

// batchBytes is the most a batch holds before it is written out.
const batchBytes = 64 << 10

var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, batchBytes); return &b }}

// batchConn is the hijacked connection under one WebSocket.
type batchConn struct {
	net.Conn

	mu   sync.Mutex
	held *[]byte // the batch's bytes; nil outside a batch
}

// Write holds p during a batch (writing out what is held first when p
// would not fit), and writes it at once otherwise.
func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		return c.Conn.Write(p)
	}
	b := *c.held
	if len(b)+len(p) > batchBytes {
		if err := c.writeHeld(); err != nil {
			return 0, err
		}
		if len(p) >= batchBytes {
			return c.Conn.Write(p)
		}
		b = *c.held
	}
	*c.held = append(b, p...)
	return len(p), nil
}

// hold starts a batch, if none is under way.
func (c *batchConn) hold() {
	c.mu.Lock()
	if c.held == nil {
		c.held = batchBufs.Get().(*[]byte)
	}
	c.mu.Unlock()
}

// release writes out what the batch holds and ends it.
func (c *batchConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		return nil
	}
	err := c.writeHeld()
	b := c.held
	c.held = nil
	*b = (*b)[:0]
	batchBufs.Put(b)
	return err
}

// writeHeld writes what is held and empties the buffer; c.mu is held.
// On an error the bytes are dropped: the connection is broken.
func (c *batchConn) writeHeld() error {
	b := *c.held
	*c.held = b[:0]
	if len(b) == 0 {
		return nil
	}
	_, err := c.Conn.Write(b)
	return err
}

// batchHijacker hands coder/websocket a batchConn when it hijacks the
// response's connection.
type batchHijacker struct {
	http.ResponseWriter
	conn *batchConn // set by Hijack
}

func (h *batchHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.conn = &batchConn{Conn: nc}
	// The library writes through brw.Writer (net/http's, emptied and
	// pointed at nc by the hijack): point it at the batchConn instead.
	if err := brw.Writer.Flush(); err != nil {
		nc.Close()
		return nil, nil, err
	}
	brw.Writer.Reset(h.conn)
	return h.conn, brw, nil
}
