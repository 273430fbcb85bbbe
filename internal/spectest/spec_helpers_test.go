package spectest_test

// Helpers of the executable spec tests (spec §11.1): starting a server
// with the limits a test needs, and binding internal/streamtest's
// helpers (subscribing, reading, comparing, as-of messages), which the
// three-node suite shares, to this suite's single harness and read
// timeout: what the session delivered is the harness's live recorder,
// what it persisted its store.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// readTimeout bounds every frame read. It is generous: the suite runs
// under -race on a small shared machine. A read that times out closes
// the connection (coder/websocket), so it is only ever a failure.
const readTimeout = 15 * time.Second

var discardLog = slog.New(slog.DiscardHandler)

func demoDelay(d time.Duration) servertest.Option { return func(c *config.Config) { c.DemoDelay = d } }
func clientQueue(n int) servertest.Option         { return func(c *config.Config) { c.ClientQueue = n } }
func replayLimit(n int) servertest.Option         { return func(c *config.Config) { c.ReplayLimit = n } }
func streamRing(n int) servertest.Option          { return func(c *config.Config) { c.StreamRing = n } }
func retention(d time.Duration) servertest.Option {
	return func(c *config.Config) { c.Retention = d }
}
func heartbeat(interval time.Duration, misses int) servertest.Option {
	return func(c *config.Config) { c.PingInterval, c.PingMisses = interval, misses }
}

// connect opens a client of a session's stream over a transport.
func connect(t *testing.T, tr streamtest.Transport, h *servertest.Harness, sid string) streamtest.Conn {
	t.Helper()
	return tr.Connect(t, h.URL, sid, nil)
}

// attachSub connects to a session, subscribes, and reads the ack (and
// the snapshot when asked for one). It fails on a subscribe_error.
func attachSub(t *testing.T, tr streamtest.Transport, h *servertest.Harness, sid string, filter any, since *string, snapshot bool) (streamtest.Conn, *protocol.SubscribeAck, *protocol.Snapshot) {
	t.Helper()
	return streamtest.Subscribe(t, tr, h.URL, sid, readTimeout, filter, since, snapshot)
}

// subscribeOn subscribes a client and reads the ack and, if asked for,
// the snapshot.
func subscribeOn(t *testing.T, c streamtest.Conn, filter any, since *string, snapshot bool) (*protocol.SubscribeAck, *protocol.Snapshot) {
	t.Helper()
	return streamtest.SubscribeOn(t, c, readTimeout, filter, since, snapshot)
}

// subscribeErr subscribes and expects a subscribe_error (on SSE, with
// the HTTP status of its code).
func subscribeErr(t *testing.T, c streamtest.Conn, filter any, since *string, snapshot bool) *protocol.SubscribeError {
	t.Helper()
	return streamtest.SubscribeRefused(t, c, readTimeout, filter, since, snapshot)
}

func readSkippingPings(t *testing.T, c streamtest.Conn) streamtest.Frame {
	t.Helper()
	return streamtest.NextFrame(t, c, readTimeout)
}

// readFrame reads the next frame of any type, pings included.
func readFrame(t *testing.T, c streamtest.Conn) streamtest.Frame {
	t.Helper()
	return c.Read(readTimeout)
}

// until reads events up to and including the first of type typ (of turn,
// if not empty).
func until(t *testing.T, c streamtest.Conn, typ event.Type, turn string) []*protocol.EventEnvelope {
	t.Helper()
	return c.Events(readTimeout, streamtest.UntilType(typ, turn))
}

// expectErrorFrame reads the next non-ping frame and checks it is an
// error frame with code.
func expectErrorFrame(t *testing.T, c *streamtest.Client, code string) {
	t.Helper()
	f := readSkippingPings(t, c)
	if f.Type != protocol.TypeError || f.Code != code {
		t.Fatalf("want error frame %s, got %s", code, f.Raw)
	}
	var e protocol.Error
	if err := json.Unmarshal(f.Raw, &e); err != nil || e.Message == "" {
		t.Fatalf("error frame without a message: %s (%v)", f.Raw, err)
	}
}

// pingPong checks a WebSocket connection is alive and in order: a client
// ping is answered by a pong with its nonce, after anything queued
// before it.
func pingPong(t *testing.T, c *streamtest.Client, nonce string) {
	t.Helper()
	c.Send(protocol.Heartbeat{Type: protocol.TypePing, Nonce: nonce})
	for {
		f := readFrame(t, c)
		switch f.Type {
		case protocol.TypePing:
			continue
		case protocol.TypePong:
			if f.Nonce != nonce {
				t.Fatalf("pong nonce %q, want %q", f.Nonce, nonce)
			}
			return
		default:
			t.Fatalf("want pong %q, got %s", nonce, f.Raw)
		}
	}
}

// alive checks that a client that was refused can still be used: on
// the WebSocket, the connection answers a ping (an SSE client has no
// connection between requests; its next subscribe is a new one).
func alive(t *testing.T, c streamtest.Conn, nonce string) {
	t.Helper()
	if ws, ok := c.(*streamtest.Client); ok {
		pingPong(t, ws, nonce)
	}
}

// expectClose reads until the stream ends and checks the close code and
// the code in the JSON reason.
func expectClose(t *testing.T, c streamtest.Conn, code int, reasonCode string) (frames []streamtest.Frame) {
	t.Helper()
	for {
		f, err := c.TryRead(readTimeout)
		if err == nil {
			frames = append(frames, f)
			continue
		}
		checkClose(t, err, code, reasonCode)
		return frames
	}
}

// checkClose checks that a read ended with a close of the code (a
// WebSocket close frame, or SSE's close event and then the end of the
// response), whose JSON reason carries reasonCode and a message.
func checkClose(t *testing.T, err error, code int, reasonCode string) {
	t.Helper()
	end, ok := streamtest.EndOf(err)
	if !ok || end.Code != code {
		t.Fatalf("stream ended with %v (close %+v), want close %d", err, end, code)
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) && len(ce.Reason) > 123 {
		t.Errorf("close reason is %d bytes", len(ce.Reason))
	}
	var r protocol.CloseReason
	if err := json.Unmarshal([]byte(end.Reason), &r); err != nil {
		t.Fatalf("close reason %q is not JSON: %v", end.Reason, err)
	}
	if r.Code != reasonCode || r.Message == "" {
		t.Fatalf("close reason %q, want code %q with a message", end.Reason, reasonCode)
	}
}

// delivered returns the events the session delivered live with
// after < id <= upTo ("" for no bound) whose type is in set (nil: all).
// A client may read an event before the recorder (a later live sink in
// the same delivery) has it, so this first waits for upTo to be
// recorded.
func delivered(h *servertest.Harness, sid, after, upTo string, set map[string]bool) []*event.Event {
	if upTo != "" {
		servertest.WaitFor(h.T, "the recorder to catch up", func() bool { return lastDelivered(h, sid) >= upTo })
	}
	return streamtest.Between(h.Live.Events(sid), after, upTo, set)
}

// countDelivered counts the events of a type the session delivered.
func countDelivered(h *servertest.Harness, sid string, typ event.Type) int {
	return streamtest.CountEvents(h.Live.Events(sid), typ)
}

// lastDelivered is the id of the newest event the session delivered.
func lastDelivered(h *servertest.Harness, sid string) string {
	return streamtest.LastID(h.Live.Events(sid))
}

// firstDelivered returns the first delivered event of a type and turn.
func firstDelivered(t *testing.T, h *servertest.Harness, sid string, typ event.Type, turn string) *event.Event {
	t.Helper()
	return streamtest.FirstOf(t, "the session", h.Live.Events(sid), typ, turn)
}

// messages returns the session's conversation from the HTTP API.
func messages(t *testing.T, h *servertest.Harness, sid string) []message.Message {
	t.Helper()
	var page struct {
		Messages []message.Message `json:"messages"`
		HasMore  bool              `json:"has_more"`
	}
	if st := h.Do("GET", "/sessions/"+sid+"/messages?limit=500", nil, &page); st != http.StatusOK {
		t.Fatalf("messages: status %d", st)
	}
	if page.HasMore {
		t.Fatal("more than 500 messages")
	}
	return page.Messages
}

// storedEvents reads a session's events from the trace store.
func storedEvents(t *testing.T, h *servertest.Harness, sid string, typs ...event.Type) []*event.Event {
	t.Helper()
	evs, err := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, Types: typs})
	servertest.Must(t, err)
	return evs
}

// anchors maps each message id to the id of the catalog event it was
// committed with (streamtest.Anchors), from the session's stored events.
func anchors(t *testing.T, h *servertest.Harness, sid string, msgs []message.Message) map[string]string {
	t.Helper()
	return streamtest.Anchors(t, storedEvents(t, h, sid), msgs)
}

func ptr(s string) *string { return &s }

// overflowGrace sets what an overflowed client still gets to take its
// close frame.
func overflowGrace(d time.Duration) servertest.Option {
	return func(c *config.Config) { c.OverflowGrace = d }
}

func writeTimeout(d time.Duration) servertest.Option {
	return func(c *config.Config) { c.WriteTimeout = d }
}
