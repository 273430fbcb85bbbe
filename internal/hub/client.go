package hub

import (
	"sync"
)

// Client is one attached subscriber: a bounded FIFO of items written by
// Publish and drained by the client's writer. Enqueueing is O(1) and
// never blocks; the queue grows on demand up to its bound, so an idle
// client costs little memory.
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

	mu        sync.Mutex
	buf       []Item // circular; len(buf) is the current capacity
	head, n   int
	overflown bool
	closed    bool
}

func newClient(h *Hub, name, sessionID string, f filter, max int) *Client {
	return &Client{Name: name, SessionID: sessionID, hub: h, filter: f, max: max, notify: make(chan struct{}, 1)}
}

// offer enqueues it and reports whether this call overflowed the queue
// (true once; later offers are dropped silently).
func (c *Client) offer(it Item) bool {
	c.mu.Lock()
	if c.closed || c.overflown {
		c.mu.Unlock()
		return false
	}
	if c.n == c.max {
		c.overflown = true
		c.mu.Unlock()
		c.signal()
		return true
	}
	if c.n == len(c.buf) {
		c.grow()
	}
	c.buf[(c.head+c.n)%len(c.buf)] = it
	c.n++
	c.mu.Unlock()
	c.signal()
	return false
}

func (c *Client) grow() {
	size := min(max(8, 2*len(c.buf)), c.max)
	nb := make([]Item, size)
	for i := 0; i < c.n; i++ {
		nb[i] = c.buf[(c.head+i)%len(c.buf)]
	}
	c.buf, c.head = nb, 0
}

func (c *Client) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Notify is signalled after items are queued or the client overflows.
func (c *Client) Notify() <-chan struct{} { return c.notify }

// Drain appends every queued item to dst (reusing its capacity) and
// reports whether the client overflowed; an overflowed client's queue is
// discarded: it is about to be closed and will replay on reconnect. It
// also returns the queue length found, for metrics.
func (c *Client) Drain(dst []Item) (items []Item, overflown bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overflown {
		c.clearLocked()
		return dst[:0], true
	}
	dst = dst[:0]
	for i := 0; i < c.n; i++ {
		j := (c.head + i) % len(c.buf)
		dst = append(dst, c.buf[j])
		c.buf[j] = Item{}
	}
	c.head, c.n = 0, 0
	// Give back a large buffer once a burst is over.
	if len(c.buf) > 64 {
		c.buf = nil
	}
	return dst, false
}

func (c *Client) clearLocked() {
	c.buf, c.head, c.n = nil, 0, 0
}

// Len returns the number of queued items.
func (c *Client) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
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
