package stream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// overflowGrace bounds what an overflowed client still gets: the write
// in progress and the 1008 client_too_slow close frame must go out
// within it, or the connection is dropped without a close frame. A
// client that still reads drains a few kilobytes well within it; one
// that stopped reading is gone this long after its queue overflowed.
const overflowGrace = 300 * time.Millisecond

// writer writes frames with a deadline. One timer per connection guards
// every write: it is armed before a write and stopped after, and if it
// fires the connection is torn down (kill), which unblocks the write.
// Writes use a background context, so a write costs no context or timer
// allocation (coder/websocket arms its own timeout only for cancellable
// contexts).
//
// hurry, called from any goroutine when the client's queue overflows,
// shortens the deadline of the write in progress (and of every later
// one, the close included) to overflowGrace.
type writer struct {
	ws      *websocket.Conn
	timeout time.Duration
	timer   *time.Timer
	hurried atomic.Bool

	mu    sync.Mutex // guards armed and the timer's resets against hurry
	armed bool
}

// newWriter returns a writer whose deadline calls kill, which must tear
// the connection down even during a close handshake.
func newWriter(ws *websocket.Conn, timeout time.Duration, kill func()) *writer {
	t := time.AfterFunc(time.Hour, kill)
	t.Stop()
	return &writer{ws: ws, timeout: timeout, timer: t}
}

// write sends one text frame under the deadline and reports whether it
// went out.
func (w *writer) write(frame []byte) bool {
	w.arm()
	ok := w.raw(frame)
	w.disarm()
	return ok
}

// arm starts the deadline for a run of raw writes; disarm ends it.
func (w *writer) arm() {
	w.mu.Lock()
	w.armed = true
	d := w.timeout
	if w.hurried.Load() {
		d = min(d, overflowGrace)
	}
	w.timer.Reset(d)
	w.mu.Unlock()
}

func (w *writer) disarm() {
	w.mu.Lock()
	w.armed = false
	w.timer.Stop()
	w.mu.Unlock()
}

// hurry marks the client as overflowed: the write in progress, if any,
// now has overflowGrace left. It never blocks on the connection.
func (w *writer) hurry() {
	w.mu.Lock()
	if !w.hurried.Swap(true) && w.armed {
		w.timer.Reset(min(w.timeout, overflowGrace))
	}
	w.mu.Unlock()
}

// raw sends one text frame; the caller has armed the deadline.
func (w *writer) raw(frame []byte) bool {
	return w.ws.Write(context.Background(), websocket.MessageText, frame) == nil
}

// close performs the close handshake with a code and reason, under the
// writer's deadline: a peer that does not take the close frame or answer
// it in time is dropped by kill.
func (w *writer) close(code websocket.StatusCode, reason string) error {
	w.arm()
	defer w.disarm()
	return w.ws.Close(code, reason)
}

func (w *writer) stop() { w.timer.Stop() }
