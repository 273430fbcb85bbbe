package hub

import (
	"sync"

	"github.com/metis-agent/metis/protocol"
)

// Client is one attached subscriber: a bounded FIFO of items written by
// Publish and drained by the client's writer. Items are shared pointers
// (one per event, whatever the number of clients). Enqueueing is an
// append under the client's own lock and never blocks; Drain swaps the
// queue with the writer's previous batch, so nothing is copied under the
// lock and the two buffers are reused. An idle client holds no buffer.
//
// The queue is bounded twice: by events (Config.ClientQueue) and by the
// bytes of their frames (Config.ClientQueueBytes). An offer that would
// cross either bound overflows the client, except that an item offered
// to an empty queue is always taken: a single frame larger than the byte
// bound would otherwise drop every client that asked for it, forever.
type Client struct {
	// Name identifies the client in warnings and logs
	// (subscription_name), e.g. "stream-17".
	Name      string
	SessionID string

	hub      *Hub
	filter   filter
	after    string // the cursor: live items at or before it are not queued
	max      int
	maxBytes int64 // 0: no byte bound
	notify   chan struct{}
	// reported is closed once the hub has reported the client as too
	// slow (its warning queued or forwarded); Unsubscribe waits for it.
	reported chan struct{}

	mu         sync.Mutex
	q          []*Item
	bytes      int64 // the frames' bytes in q
	overflown  bool
	overflow   Overflow // why, once overflown
	closed     bool
	onOverflow func()
}

// Overflow says why a client's queue was given up: what it held when
// the offer that did not fit came (Events, Bytes), or that an event of
// the session was lost and the client must resynchronise (Resync; the
// queue is then dropped whatever it held).
type Overflow struct {
	Events int   // items queued at the overflow
	Bytes  int64 // bytes of their frames
	Resync bool  // an event could not be delivered live (Hub.Resync), not a full queue
	// Reason is the close reason of a resync: client_too_slow (an event
	// could not be committed), resync (events never reached this node)
	// or owner_changed (the node lost the session's tree).
	Reason protocol.CloseReason
}

func newClient(h *Hub, name, sessionID string, f filter, max int) *Client {
	c := &Client{Name: name, SessionID: sessionID, hub: h, filter: f, max: max, notify: make(chan struct{}, 1),
		reported: make(chan struct{})}
	if h != nil {
		c.maxBytes = h.cfg.ClientQueueBytes
	}
	return c
}

// offer enqueues it and reports whether this call overflowed the queue
// (true once; later offers are dropped silently).
func (c *Client) offer(it *Item) bool {
	size := int64(len(it.Frame))
	c.mu.Lock()
	if c.closed || c.overflown {
		c.mu.Unlock()
		return false
	}
	if len(c.q) == c.max || (c.maxBytes > 0 && len(c.q) > 0 && c.bytes+size > c.maxBytes) {
		c.overflown = true
		c.overflow = Overflow{Events: len(c.q), Bytes: c.bytes}
		c.q, c.bytes = nil, 0
		hook := c.onOverflow
		c.mu.Unlock()
		if hook != nil {
			hook()
		}
		c.signal()
		return true
	}
	c.q = append(c.q, it)
	c.bytes += size
	c.mu.Unlock()
	c.signal()
	return false
}

func (c *Client) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// OnOverflow sets f to be called once, at the moment the queue
// overflows, from the publishing goroutine (at once if it already has).
// It lets the client's writer give up a write that the client is not
// reading, instead of waiting for its write timeout; f must not block.
func (c *Client) OnOverflow(f func()) {
	c.mu.Lock()
	c.onOverflow = f
	already := c.overflown
	c.mu.Unlock()
	if already && f != nil {
		f()
	}
}

// Notify is signalled after items are queued or the client overflows.
func (c *Client) Notify() <-chan struct{} { return c.notify }

// keepBatch is the largest buffer kept for reuse after a drain that
// found little: a burst's large buffer is let go once it is over.
const keepBatch = 256

// Drain returns every queued item, oldest first, and reports whether the
// client overflowed (an overflowed client's queue is discarded: it is
// about to be closed and will replay on reconnect). prev is the batch the
// caller finished writing: its buffer becomes the client's next queue.
func (c *Client) Drain(prev []*Item) (items []*Item, overflown bool) {
	clear(prev) // let the written items go
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overflown {
		c.q = nil
		return prev[:0], true
	}
	items = c.q
	if cap(prev) > keepBatch && len(items) < keepBatch/4 {
		prev = nil
	}
	c.q, c.bytes = prev[:0], 0
	return items, false
}

// resync drops the client's queue and marks it for closing with
// reason, as an overflow does; the transport's writer closes it when it
// wakes.
func (c *Client) resync(reason protocol.CloseReason) {
	c.mu.Lock()
	if c.closed || c.overflown {
		c.mu.Unlock()
		return
	}
	c.overflown = true
	c.overflow = Overflow{Events: len(c.q), Bytes: c.bytes, Resync: true, Reason: reason}
	c.q, c.bytes = nil, 0
	c.mu.Unlock()
	c.signal()
}

func (c *Client) clearLocked() { c.q, c.bytes = nil, 0 }

// Len returns the number of queued items.
func (c *Client) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.q)
}

// Bytes returns the bytes of the queued items' frames.
func (c *Client) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Overflown reports whether the queue overflowed (or the client was
// resynchronised).
func (c *Client) Overflown() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overflown
}

// Overflow reports why the client's queue was given up, and whether it
// was.
func (c *Client) Overflow() (Overflow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overflow, c.overflown
}

func (c *Client) close() {
	c.mu.Lock()
	c.closed = true
	c.clearLocked()
	c.mu.Unlock()
	c.signal()
}
