// Package streamtest holds small clients of the metis stream for tests
// and benchmarks, one per transport, behind one interface (Conn):
//
//   - Client, over the WebSocket: attach (GET /sessions/{id}, then dial
//     ws_url), send a subscribe frame, read frames;
//   - SSEClient, over server-sent events: GET /sessions/{id}/events with
//     the subscription in the query, read the frames from the data:
//     lines; a refused subscribe is an HTTP error status with the JSON
//     error body, which it hands back as a subscribe_error frame.
//
// Both skip event frames of a type they do not know, with a debug log, as
// spec §9.2 asks of every client, and both report how the stream ended
// (EndOf): the close code and the JSON reason of the WebSocket's close
// frame, or of the SSE stream's final close event.
//
// It also holds the helpers the two spec §11 suites (internal/spectest,
// one node, and internal/server/clustertest, three) share, taking a
// testing.TB, a server's base URL and a read timeout rather than a
// harness: subscribing and reading the answer (subscribe.go),
// comparing what a client saw with what the server delivered
// (compare.go, delivered.go), payloads (payload.go), what a snapshot as
// of an event holds (asof.go), the message in flight a snapshot carries
// and how the deltas after it continue it (inflight.go), JSON equality
// (jsoncmp.go), filter
// presets (preset.go), builtin:demo prompts (demo.go) and a client with
// a narrow socket (narrow_linux.go).
//
// It imports protocol, event, message and the WebSocket library, never
// a server or its harness (internal/server, internal/servertest); only
// tests import it.
package streamtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// Conn is one client of a session's stream, over whichever transport:
// what the spec's tests need of it.
type Conn interface {
	// Transport names the transport: "ws" or "sse".
	Transport() string
	// Subscribe subscribes. filter is a preset name ("preset:chat") or a
	// protocol.Filter; nil is the default (preset:full). The answer is
	// the next frame read: subscribe_ack, or subscribe_error.
	Subscribe(filter any, since *string, snapshot bool)
	// Read returns the next frame, failing the test on an error.
	Read(timeout time.Duration) Frame
	// TryRead returns the next frame, or the error that ended the
	// stream: EndOf tells a clean close (with its code and reason) from
	// a connection torn down.
	TryRead(timeout time.Duration) (Frame, error)
	// Events reads event frames until until returns true (inclusive),
	// failing on any other frame but pings and pongs.
	Events(timeout time.Duration, until func(*protocol.EventEnvelope) bool) []*protocol.EventEnvelope
	// LastEventID is the cursor a reconnecting client resumes from: the
	// id of the last event (or snapshot) received, "" before any.
	LastEventID() string
	// Close drops the connection at once, without a goodbye. It may be
	// called while another goroutine is in TryRead.
	Close()
}

// Transport opens Conns of one kind.
type Transport struct {
	Name string
	// Connect returns a client of sessionID's stream on the server at
	// base (http://host:port), closed when the test ends. hc, when not
	// nil, carries its HTTP requests (for a dialer with small socket
	// buffers). The WebSocket connects at once; SSE connects on
	// Subscribe.
	Connect func(t testing.TB, base, sessionID string, hc *http.Client) Conn
}

// The transports, in the order tests run them.
var (
	WebSocket = Transport{Name: "ws", Connect: func(t testing.TB, base, sid string, hc *http.Client) Conn {
		return AttachWith(t, base, sid, hc)
	}}
	SSE = Transport{Name: "sse", Connect: func(t testing.TB, base, sid string, hc *http.Client) Conn {
		return NewSSE(t, base, sid, hc)
	}}
	Transports = []Transport{WebSocket, SSE}
)

// Frame is one decoded server frame.
type Frame struct {
	Type  string
	Raw   []byte
	Event *protocol.EventEnvelope // event frames
	Ack   *protocol.SubscribeAck  // subscribe_ack
	Err   *protocol.SubscribeError
	Snap  *protocol.Snapshot
	Close *protocol.CloseFrame // SSE's final close event
	Nonce string               // ping, pong
	Code  string               // error frames
	// ID is the SSE event's id: field ("" when it had none, and on the
	// WebSocket).
	ID string
	// Status is the HTTP status of an SSE subscribe that was refused
	// before the stream opened (0 otherwise).
	Status int
}

// Decode decodes one server frame.
func Decode(data []byte) (Frame, error) {
	var head struct {
		Type  string          `json:"type"`
		Nonce string          `json:"nonce"`
		Code  json.RawMessage `json:"code"` // a string in error frames, a number in close events
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Frame{}, fmt.Errorf("decode frame %q: %w", data, err)
	}
	f := Frame{Type: head.Type, Raw: data, Nonce: head.Nonce}
	var err error
	switch head.Type {
	case protocol.TypeEvent:
		var w struct {
			Event protocol.EventEnvelope `json:"event"`
		}
		err = json.Unmarshal(data, &w)
		f.Event = &w.Event
	case protocol.TypeSubscribeAck:
		f.Ack = new(protocol.SubscribeAck)
		err = json.Unmarshal(data, f.Ack)
	case protocol.TypeSubscribeError:
		f.Err = new(protocol.SubscribeError)
		err = json.Unmarshal(data, f.Err)
	case protocol.TypeSnapshot:
		f.Snap = new(protocol.Snapshot)
		err = json.Unmarshal(data, f.Snap)
	case protocol.TypeClose:
		f.Close = new(protocol.CloseFrame)
		err = json.Unmarshal(data, f.Close)
	case protocol.TypeError:
		if len(head.Code) > 0 {
			err = json.Unmarshal(head.Code, &f.Code)
		}
	}
	if err != nil {
		return Frame{}, fmt.Errorf("decode %s frame %q: %w", head.Type, data, err)
	}
	return f, nil
}

// eventsOf is Conn.Events over Read.
func eventsOf(t testing.TB, c Conn, timeout time.Duration, until func(*protocol.EventEnvelope) bool) []*protocol.EventEnvelope {
	t.Helper()
	var out []*protocol.EventEnvelope
	for {
		f := c.Read(timeout)
		switch f.Type {
		case protocol.TypePing, protocol.TypePong:
			continue
		case protocol.TypeEvent:
			out = append(out, f.Event)
			if until(f.Event) {
				return out
			}
		default:
			t.Fatalf("unexpected %s frame while reading events: %s", f.Type, f.Raw)
		}
	}
}

// UntilType returns a predicate matching an event type (and turn, if
// turn is not empty).
func UntilType(typ event.Type, turn string) func(*protocol.EventEnvelope) bool {
	return func(e *protocol.EventEnvelope) bool {
		return e.Type == string(typ) && (turn == "" || (e.TurnID != nil && *e.TurnID == turn))
	}
}

// End is how the server ended a stream: the close code and the JSON
// reason (a WebSocket close frame's, or an SSE close event's).
type End struct {
	Code   int
	Reason string
}

// EndError is the error TryRead returns once an SSE stream has ended
// cleanly: a close event, then the end of the response.
type EndError struct{ End End }

func (e *EndError) Error() string {
	return fmt.Sprintf("stream closed with %d %s", e.End.Code, e.End.Reason)
}

// EndOf returns the close code and reason of a read error, and false if
// the stream did not end with one (a connection torn down, a timeout).
func EndOf(err error) (End, bool) {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return End{Code: int(ce.Code), Reason: ce.Reason}, true
	}
	var ee *EndError
	if errors.As(err, &ee) {
		return ee.End, true
	}
	return End{}, false
}

// CloseStatus returns the close code of a read error (-1 if none).
func CloseStatus(err error) websocket.StatusCode {
	if e, ok := EndOf(err); ok {
		return websocket.StatusCode(e.Code)
	}
	return -1
}
