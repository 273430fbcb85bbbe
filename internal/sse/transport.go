package sse

import (
	"bufio"
	"net/http"
	"sync"
	"time"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// transport is the feed's transport over one SSE response. The first
// write is preceded by the retry field; every frame is one event, its
// JSON in data: and its cursor, if any, in id:.
//
// Writes between two flushes go to a buffer taken from a pool and
// handed back at the flush (an idle client holds none), so a batch of
// replayed events leaves in a few large writes instead of the response
// writer's 4 KiB ones.
type transport struct {
	sess  *gosse.Session
	w     http.ResponseWriter
	rc    *http.ResponseController
	gone  <-chan struct{}
	retry time.Duration // sent before the first frame, then 0

	bw *bufio.Writer // between a write and the flush; nil otherwise

	mu       sync.Mutex // guards finished against Kill
	finished bool       // the handler returned: the connection may serve another request
}

// writeBufferSize is the buffer a batch is written through.
const writeBufferSize = 32 << 10

var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufferSize) }}

// buf returns the batch's buffer, upgrading the response (its headers
// go out) and writing the retry field before the first frame.
func (t *transport) buf() (*bufio.Writer, error) {
	if t.bw != nil {
		return t.bw, nil
	}
	if t.retry > 0 {
		if err := t.sess.Send(&gosse.Message{Retry: t.retry}); err != nil {
			return nil, err
		}
		t.retry = 0
	}
	t.bw = writers.Get().(*bufio.Writer)
	t.bw.Reset(t.w)
	return t.bw, nil
}

func (t *transport) Write(cursor string, frame []byte) error {
	bw, err := t.buf()
	if err != nil {
		return err
	}
	_, err = message(cursor, frame).WriteTo(bw)
	return err
}

// WriteItem writes an event's record with the head every SSE client
// shares (see recordHead).
func (t *transport) WriteItem(it *hub.Item) error {
	head := it.Encoded(recordHead)
	if head == nil {
		return t.Write(it.ID, it.Frame)
	}
	bw, err := t.buf()
	if err != nil {
		return err
	}
	bw.Write(head)
	bw.Write(it.Frame)
	_, err = bw.Write(endRecord)
	return err
}

// Flush writes out the batch's buffer, gives it back, and flushes the
// response.
func (t *transport) Flush() error {
	if bw := t.bw; bw != nil {
		t.bw = nil
		err := bw.Flush()
		bw.Reset(nil)
		writers.Put(bw)
		if err != nil {
			return err
		}
	}
	return t.sess.Flush()
}

// Heartbeat writes a comment line: SSE clients skip it, and it keeps
// proxies and the client's idle timers from closing a quiet stream.
func (t *transport) Heartbeat(string) error {
	var m gosse.Message
	m.AppendComment("ping")
	bw, err := t.buf()
	if err != nil {
		return err
	}
	_, err = m.WriteTo(bw)
	return err
}

// Close sends the close frame; the handler then ends the response.
func (t *transport) Close(code int, reason protocol.CloseDetail) error {
	if err := t.Write("", protocol.Marshal(protocol.CloseFrame{Type: protocol.TypeClose, Code: code, Reason: reason})); err != nil {
		return err
	}
	return t.Flush()
}

// Kill makes the write in progress, and every later one, fail at once:
// the connection's write deadline is moved to the past. net/http then
// closes the connection when the handler returns. Once the handler has
// returned it does nothing, so a late timer cannot touch a connection
// serving another request.
func (t *transport) Kill() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.finished {
		_ = t.rc.SetWriteDeadline(time.Unix(1, 0))
	}
}

// finish marks the handler's end and gives back a buffer a failed
// batch left.
func (t *transport) finish() {
	t.mu.Lock()
	t.finished = true
	t.mu.Unlock()
	if bw := t.bw; bw != nil {
		t.bw = nil
		bw.Reset(nil)
		writers.Put(bw)
	}
}

func (t *transport) Gone() <-chan struct{} { return t.gone }
