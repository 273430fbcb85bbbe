package hub

import (
	"sync"
)

// Client is one attached subscriber: a bounded FIFO of items written by
// Publish and drained by the client's writer. Items are shared pointers
// (one per event, whatever the number of clients). Enqueueing is an
// append under the client's own lock and never blocks; Drain swaps the
// queue with the writer's previous batch, so nothing is copied under the
// lock and the two buffers are reused. An idle client holds no buffer.
type Client struct {
	// Name identifies the client in warnings and logs
	// (subscription_name), e.g. "stream-17".
	Name      string
	SessionID string

	hub    *Hub
	filter filter
	after  string // the cursor: live items at or before it are not queued
	max    int
	notify chan struct{}

	mu         sync.Mutex
	q          []*Item
	overflown  bool
	closed     bool
	onOverflow func()
}

func newClient(h *Hub, name, sessionID string, f filter, max int) *Client {
	return &Client{Name: name, SessionID: sessionID, hub: h, filter: f, max: max, notify: make(chan struct{}, 1)}
}

// offer enqueues it and reports whether this call overflowed the queue
// (true once; later offers are dropped silently).
func (c *Client) offer(it *Item) bool {
	c.mu.Lock()
	if c.closed || c.overflown {
		c.mu.Unlock()
		return false
	}
	if len(c.q) == c.max {
		c.overflown = true
		c.q = nil
		hook := c.onOverflow
		c.mu.Unlock()
		if hook != nil {
			hook()
		}
		c.signal()
		return true
	}
	c.q = append(c.q, it)
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
	c.q = prev[:0]
	return items, false
}

func (c *Client) clearLocked() { c.q = nil }

// Len returns the number of queued items.
func (c *Client) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.q)
}

// Overflown reports whether the queue overflowed.
func (c *Client) Overflown() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overflown
}

func (c *Client) close() {
	c.mu.Lock()
	c.closed = true
	c.clearLocked()
	c.mu.Unlock()
	c.signal()
}
