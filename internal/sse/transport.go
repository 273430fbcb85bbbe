package sse

import (
	"net/http"
	"sync"
	"time"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/metis-agent/metis/protocol"
)

// transport is the feed's transport over one SSE response. The first
// write is preceded by the retry field; every frame is one event, its
// JSON in data: and its cursor, if any, in id:.
type transport struct {
	sess  *gosse.Session
	rc    *http.ResponseController
	gone  <-chan struct{}
	retry time.Duration // sent before the first frame, then 0

	mu       sync.Mutex // guards finished against Kill
	finished bool       // the handler returned: the connection may serve another request
}

func (t *transport) Write(cursor string, frame []byte) error {
	if t.retry > 0 {
		if err := t.sess.Send(&gosse.Message{Retry: t.retry}); err != nil {
			return err
		}
		t.retry = 0
	}
	var m gosse.Message
	if cursor != "" {
		// Cursors are event ids (no newline or NUL); one that is not
		// valid as an SSE id goes without.
		if id, err := gosse.NewID(cursor); err == nil {
			m.ID = id
		}
	}
	m.AppendData(string(frame))
	return t.sess.Send(&m)
}

func (t *transport) Flush() error { return t.sess.Flush() }

// Heartbeat writes a comment line: SSE clients skip it, and it keeps
// proxies and the client's idle timers from closing a quiet stream.
func (t *transport) Heartbeat(string) error {
	var m gosse.Message
	m.AppendComment("ping")
	return t.sess.Send(&m)
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

func (t *transport) finish() {
	t.mu.Lock()
	t.finished = true
	t.mu.Unlock()
}

func (t *transport) Gone() <-chan struct{} { return t.gone }
