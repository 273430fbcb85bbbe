package feed

import (
	"sync"
	"sync/atomic"
	"time"
)

// OverflowGrace is the default Config.OverflowGrace. It bounds what an
// overflowed client still gets: the write in progress and the
// client_too_slow close must go out within it, or the connection is
// killed without a close. A client that still reads drains a few
// kilobytes well within it; one that stopped reading is gone this long
// after its queue overflowed.
const OverflowGrace = 300 * time.Millisecond

// deadline guards every write of a feed with one timer: it is armed
// before a write and stopped after, and if it fires the transport is
// killed, which unblocks the write. hurry, called from any goroutine
// when the client's queue overflows, shortens the deadline of the write
// in progress (and of every later one, the close included) to
// the grace (Config.OverflowGrace).
type deadline struct {
	timeout time.Duration
	grace   time.Duration
	timer   *time.Timer
	hurried atomic.Bool
	expired atomic.Bool // the timer fired: the transport was killed

	mu      sync.Mutex // guards the fields below and the timer's resets against hurry
	armed   bool
	since   time.Time     // when the write in progress started
	stalled time.Duration // at hurry: how long the write in progress had been going
}

func newDeadline(timeout, grace time.Duration, kill func()) *deadline {
	d := &deadline{timeout: timeout, grace: grace}
	d.timer = time.AfterFunc(time.Hour, func() {
		d.expired.Store(true)
		kill()
	})
	d.timer.Stop()
	return d
}

// arm starts the deadline for a write, or a run of writes; disarm ends
// it.
func (d *deadline) arm() {
	d.mu.Lock()
	d.armed, d.since = true, time.Now()
	t := d.timeout
	if d.hurried.Load() {
		t = min(t, d.grace)
	}
	d.timer.Reset(t)
	d.mu.Unlock()
}

func (d *deadline) disarm() {
	d.mu.Lock()
	d.armed = false
	d.timer.Stop()
	d.mu.Unlock()
}

// hurry marks the client as overflowed: the write in progress, if any,
// now has the grace left. It never blocks on the connection.
func (d *deadline) hurry() {
	d.mu.Lock()
	if !d.hurried.Swap(true) && d.armed {
		d.stalled = time.Since(d.since)
		d.timer.Reset(min(d.timeout, d.grace))
	}
	d.mu.Unlock()
}

// stalledFor reports how long the write in progress at the overflow had
// been going then (0: none was).
func (d *deadline) stalledFor() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stalled
}

func (d *deadline) stop() { d.timer.Stop() }
