package streamtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// EachTransport runs f as one subtest per transport, in Transports'
// order.
func EachTransport(t *testing.T, f func(t *testing.T, tr Transport)) {
	t.Helper()
	for _, tr := range Transports {
		t.Run(tr.Name, func(t *testing.T) { f(t, tr) })
	}
}

// Subscribe connects a client of sessionID's stream on the server at
// base over tr, subscribes, and reads the ack (and the snapshot when
// asked for one), each read bounded by timeout. It fails the test on a
// subscribe_error.
func Subscribe(t testing.TB, tr Transport, base, sessionID string, timeout time.Duration, filter any, since *string, snapshot bool) (Conn, *protocol.SubscribeAck, *protocol.Snapshot) {
	t.Helper()
	c := tr.Connect(t, base, sessionID, nil)
	ack, snap := SubscribeOn(t, c, timeout, filter, since, snapshot)
	return c, ack, snap
}

// SubscribeOn subscribes a connected client and reads the ack and, if
// asked for, the snapshot, skipping pings and pongs. It fails the test
// unless they come, in that order.
func SubscribeOn(t testing.TB, c Conn, timeout time.Duration, filter any, since *string, snapshot bool) (*protocol.SubscribeAck, *protocol.Snapshot) {
	t.Helper()
	c.Subscribe(filter, since, snapshot)
	f := NextFrame(t, c, timeout)
	if f.Ack == nil {
		t.Fatalf("want subscribe_ack, got %s", f.Raw)
	}
	if !snapshot {
		return f.Ack, nil
	}
	s := NextFrame(t, c, timeout)
	if s.Snap == nil {
		t.Fatalf("want snapshot, got %s", s.Raw)
	}
	return f.Ack, s.Snap
}

// SSERefusalStatus is the HTTP status an SSE subscribe is refused with,
// by the code of its JSON error body (docs/protocol.md).
var SSERefusalStatus = map[string]int{
	protocol.CodeSessionNotFound: http.StatusNotFound,
	protocol.CodeInvalidFilter:   http.StatusBadRequest,
	protocol.CodeInvalidCursor:   http.StatusBadRequest,
	protocol.CodeInvalidRequest:  http.StatusBadRequest,
	protocol.CodeCursorExpired:   http.StatusGone,
	protocol.CodeReplayTooLarge:  http.StatusConflict,
}

// SubscribeRefused subscribes and expects a subscribe_error: a frame on
// the WebSocket, an HTTP status with the JSON error body on SSE, whose
// status must be the one SSERefusalStatus gives its code.
func SubscribeRefused(t testing.TB, c Conn, timeout time.Duration, filter any, since *string, snapshot bool) *protocol.SubscribeError {
	t.Helper()
	c.Subscribe(filter, since, snapshot)
	f := NextFrame(t, c, timeout)
	if f.Err == nil {
		t.Fatalf("want subscribe_error, got %s", f.Raw)
	}
	if c.Transport() == SSE.Name {
		if want, ok := SSERefusalStatus[f.Err.Code]; !ok || f.Status != want {
			t.Fatalf("SSE subscribe refused with %d %s, want %d", f.Status, f.Raw, want)
		}
	}
	return f.Err
}

// NextFrame reads the next frame that is not a ping or a pong, failing
// the test on a timeout or an error.
func NextFrame(t testing.TB, c Conn, timeout time.Duration) Frame {
	t.Helper()
	for {
		f := c.Read(timeout)
		if f.Type != protocol.TypePing && f.Type != protocol.TypePong {
			return f
		}
	}
}

// ReadEvents reads the next n frames skipping pings and pongs, failing
// the test unless each is an event.
func ReadEvents(t testing.TB, c Conn, timeout time.Duration, n int) []*protocol.EventEnvelope {
	t.Helper()
	out := make([]*protocol.EventEnvelope, 0, n)
	for range n {
		f := NextFrame(t, c, timeout)
		if f.Event == nil {
			t.Fatalf("want a replayed event, got %s", f.Raw)
		}
		out = append(out, f.Event)
	}
	return out
}
