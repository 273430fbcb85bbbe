package feed

import (
	"context"
	"sync"
)

// Clients is a transport's set of serving clients, for its shutdown:
// Join admits a client unless the transport is closing, Shutdown is
// closed when it starts to close (pass it to Serve), and Close refuses
// new clients, tells the served ones to end, and waits for them. The
// zero value is not usable; use NewClients.
type Clients struct {
	ctx    context.Context // cancelled by Close
	stop   context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// NewClients returns an open set.
func NewClients() *Clients {
	ctx, stop := context.WithCancel(context.Background())
	return &Clients{ctx: ctx, stop: stop}
}

// Join admits a client and reports true, or false once Close has been
// called. An admitted client calls Leave when its handler returns.
func (c *Clients) Join() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// Leave ends a client admitted by Join.
func (c *Clients) Leave() { c.wg.Done() }

// Shutdown is closed when Close is called.
func (c *Clients) Shutdown() <-chan struct{} { return c.ctx.Done() }

// Context is cancelled when Close is called: for the reads a client
// does on the server's behalf (its subscribe).
func (c *Clients) Context() context.Context { return c.ctx }

// Close refuses new clients, closes Shutdown so that every served
// client flushes what is queued and ends with its going-away close, and
// waits for them, bounded by ctx.
func (c *Clients) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
