package stream

import (
	"context"
	"time"

	"github.com/coder/websocket"
)

// writer writes frames with a deadline. One timer per connection guards
// every write: it is armed before a write and stopped after, and if it
// fires the connection is torn down, which unblocks the write. Writes use
// a background context, so a write costs no context or timer allocation
// (coder/websocket arms its own timeout only for cancellable contexts).
type writer struct {
	ws      *websocket.Conn
	timeout time.Duration
	timer   *time.Timer
}

func newWriter(ws *websocket.Conn, timeout time.Duration) writer {
	t := time.AfterFunc(time.Hour, func() { _ = ws.CloseNow() })
	t.Stop()
	return writer{ws: ws, timeout: timeout, timer: t}
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
func (w *writer) arm()    { w.timer.Reset(w.timeout) }
func (w *writer) disarm() { w.timer.Stop() }

// raw sends one text frame; the caller has armed the deadline.
func (w *writer) raw(frame []byte) bool {
	return w.ws.Write(context.Background(), websocket.MessageText, frame) == nil
}

// close performs the close handshake (bounded by the library's own
// timeouts) with a code and reason.
func (w *writer) close(code websocket.StatusCode, reason string) error {
	return w.ws.Close(code, reason)
}

func (w *writer) stop() { w.timer.Stop() }
