package spectest_test

// Helpers shared by the executable spec tests (spec §11.1): starting a
// server with the limits a test needs, attaching and subscribing,
// decoding payloads, and comparing what a client saw with what the
// session delivered (the harness's live recorder) and persisted.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/api"
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

// eachTransport runs f as one subtest per transport.
func eachTransport(t *testing.T, f func(t *testing.T, tr streamtest.Transport)) {
	t.Helper()
	for _, tr := range streamtest.Transports {
		t.Run(tr.Name, func(t *testing.T) { f(t, tr) })
	}
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
	c := connect(t, tr, h, sid)
	ack, snap := subscribeOn(t, c, filter, since, snapshot)
	return c, ack, snap
}

// subscribeOn subscribes a client and reads the ack and, if asked for,
// the snapshot.
func subscribeOn(t *testing.T, c streamtest.Conn, filter any, since *string, snapshot bool) (*protocol.SubscribeAck, *protocol.Snapshot) {
	t.Helper()
	c.Subscribe(filter, since, snapshot)
	f := readSkippingPings(t, c)
	if f.Ack == nil {
		t.Fatalf("want subscribe_ack, got %s", f.Raw)
	}
	if !snapshot {
		return f.Ack, nil
	}
	s := readSkippingPings(t, c)
	if s.Snap == nil {
		t.Fatalf("want snapshot, got %s", s.Raw)
	}
	return f.Ack, s.Snap
}

// sseStatus is the HTTP status an SSE subscribe is refused with, by the
// code of its error body (docs/protocol.md).
var sseStatus = map[string]int{
	protocol.CodeSessionNotFound: http.StatusNotFound,
	protocol.CodeInvalidFilter:   http.StatusBadRequest,
	protocol.CodeInvalidCursor:   http.StatusBadRequest,
	api.CodeInvalidRequest:       http.StatusBadRequest,
	protocol.CodeCursorExpired:   http.StatusGone,
	protocol.CodeReplayTooLarge:  http.StatusConflict,
}

// subscribeErr subscribes and expects a subscribe_error: a frame on the
// WebSocket, an HTTP status with the JSON error body on SSE (whose
// status must be the one for its code).
func subscribeErr(t *testing.T, c streamtest.Conn, filter any, since *string, snapshot bool) *protocol.SubscribeError {
	t.Helper()
	c.Subscribe(filter, since, snapshot)
	f := readSkippingPings(t, c)
	if f.Err == nil {
		t.Fatalf("want subscribe_error, got %s", f.Raw)
	}
	if c.Transport() == streamtest.SSE.Name {
		if want, ok := sseStatus[f.Err.Code]; !ok || f.Status != want {
			t.Fatalf("SSE subscribe refused with %d %s, want %d", f.Status, f.Raw, want)
		}
	}
	return f.Err
}

func readSkippingPings(t *testing.T, c streamtest.Conn) streamtest.Frame {
	t.Helper()
	for {
		f := c.Read(readTimeout)
		if f.Type != protocol.TypePing && f.Type != protocol.TypePong {
			return f
		}
	}
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

// ids lists event ids.
func ids(evs []*protocol.EventEnvelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func recIDs(evs []*event.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func types(evs []*protocol.EventEnvelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// collapse lists types with runs of the same type folded into one entry.
func collapse(ts []string) []string {
	var out []string
	for _, t := range ts {
		if len(out) == 0 || out[len(out)-1] != t {
			out = append(out, t)
		}
	}
	return out
}

// checkIncreasing fails unless every id is > after and ids strictly
// increase (which also rules out duplicates).
func checkIncreasing(t *testing.T, what string, evs []*protocol.EventEnvelope, after string) {
	t.Helper()
	prev := after
	for i, e := range evs {
		if e.ID <= prev {
			t.Fatalf("%s: event %d (%s %s) is not after %q", what, i, e.ID, e.Type, prev)
		}
		prev = e.ID
	}
}

// typeSet is a filter's type set.
func typeSet(preset string) map[string]bool {
	ts, ok := event.Preset(preset)
	if !ok {
		panic(preset)
	}
	m := map[string]bool{}
	for _, t := range ts {
		m[string(t)] = true
	}
	return m
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
	var out []*event.Event
	for _, e := range h.Live.Events(sid) {
		if e.ID <= after || upTo != "" && e.ID > upTo {
			continue
		}
		if set == nil || set[string(e.Type)] {
			out = append(out, e)
		}
	}
	return out
}

// sameIDs fails unless the client's events are exactly the delivered
// ones, in order.
func sameIDs(t *testing.T, what string, got []*protocol.EventEnvelope, want []*event.Event) {
	t.Helper()
	g, w := ids(got), recIDs(want)
	if slices.Equal(g, w) {
		return
	}
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	describe := func(k int, list []string, evs func(int) string) string {
		if k >= len(list) {
			return "(end)"
		}
		return list[k] + " " + evs(k)
	}
	t.Fatalf("%s: %d events, want %d; first difference at %d: got %s, want %s", what, len(g), len(w), i,
		describe(i, g, func(k int) string { return got[k].Type }),
		describe(i, w, func(k int) string { return string(want[k].Type) }))
}

// countType counts events of a type.
func countType(evs []*protocol.EventEnvelope, typ event.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == string(typ) {
			n++
		}
	}
	return n
}

func countDelivered(h *servertest.Harness, sid string, typ event.Type) int {
	n := 0
	for _, e := range h.Live.Events(sid) {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// lastDelivered is the id of the newest event the session delivered.
func lastDelivered(h *servertest.Harness, sid string) string {
	evs := h.Live.Events(sid)
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].ID
}

// firstDelivered returns the first delivered event of a type and turn.
func firstDelivered(t *testing.T, h *servertest.Harness, sid string, typ event.Type, turn string) *event.Event {
	t.Helper()
	for _, e := range h.Live.Events(sid) {
		if e.Type == typ && (turn == "" || e.TurnID == turn) {
			return e
		}
	}
	t.Fatalf("no %s delivered for turn %q", typ, turn)
	return nil
}

// decode decodes an event's payload.
func decode[T any](t *testing.T, e *protocol.EventEnvelope) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		t.Fatalf("%s payload %s: %v", e.Type, e.Payload, err)
	}
	return v
}

// Payload shapes the tests read (spec §5.3, contract §4).
type (
	deltaPayload struct {
		MessageID string  `json:"message_id"`
		Index     int     `json:"content_block_index"`
		Text      string  `json:"text"`
		Signature *string `json:"signature"`
	}
	toolInputPayload struct {
		MessageID   string `json:"message_id"`
		Index       int    `json:"content_block_index"`
		ToolUseID   string `json:"tool_use_id"`
		PartialJSON string `json:"partial_json"`
	}
	toolUsePayload struct {
		MessageID  string          `json:"message_id"`
		Index      int             `json:"content_block_index"`
		ToolUseID  string          `json:"tool_use_id"`
		ToolName   string          `json:"tool_name"`
		FinalInput json.RawMessage `json:"final_input"`
	}
	completePayload struct {
		MessageID    string          `json:"message_id"`
		StopReason   string          `json:"stop_reason"`
		FinalContent []message.Block `json:"final_content"`
		Usage        message.Usage   `json:"usage"`
	}
	llmPayload struct {
		MessageID  string        `json:"message_id"`
		StopReason string        `json:"stop_reason"`
		ErrorClass string        `json:"error_class"`
		Message    string        `json:"message"`
		Usage      message.Usage `json:"usage"`
	}
	warningPayload struct {
		SubscriptionName string `json:"subscription_name"`
		Reason           string `json:"reason"`
		TurnID           string `json:"turn_id"`
	}
)

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
// committed with: a user message with turn.started, an assistant message
// with llm.call_completed/failed, a tool results message with the
// tool.completed/failed of its last result. A snapshot as of event X holds
// exactly the messages whose anchor is <= X.
func anchors(t *testing.T, h *servertest.Harness, sid string, msgs []message.Message) map[string]string {
	t.Helper()
	evs := storedEvents(t, h, sid)
	byUser, byLLM, byTool := map[string]string{}, map[string]string{}, map[string]string{}
	for _, e := range evs {
		switch e.Type {
		case event.TurnStarted:
			var p struct {
				UserMessage message.Message `json:"user_message"`
			}
			servertest.Must(t, json.Unmarshal(e.Payload, &p))
			byUser[p.UserMessage.ID] = e.ID
		case event.LLMCallCompleted, event.LLMCallFailed:
			var p llmPayload
			servertest.Must(t, json.Unmarshal(e.Payload, &p))
			byLLM[p.MessageID] = e.ID
		case event.ToolCompleted, event.ToolFailed:
			var p struct {
				ToolUseID string `json:"tool_use_id"`
			}
			servertest.Must(t, json.Unmarshal(e.Payload, &p))
			byTool[e.TurnID+"/"+p.ToolUseID] = e.ID // builtin:demo reuses tool_use ids across turns
		}
	}
	out := map[string]string{}
	for _, m := range msgs {
		var a string
		switch m.Role {
		case message.RoleUser:
			a = byUser[m.ID]
		case message.RoleAssistant:
			a = byLLM[m.ID]
		case message.RoleTool:
			last := m.Content[len(m.Content)-1]
			a = byTool[m.TurnID+"/"+last.ToolUseID]
		}
		if a == "" {
			t.Fatalf("no anchor event for message %s (%s)", m.ID, m.Role)
		}
		out[m.ID] = a
	}
	return out
}

// asOf returns the newest limit messages whose anchor is <= id, as JSON.
func asOf(msgs []message.Message, anchor map[string]string, id string, limit int) []json.RawMessage {
	var out []json.RawMessage
	for _, m := range msgs {
		if anchor[m.ID] <= id {
			b, _ := json.Marshal(m)
			out = append(out, b)
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// sameJSON compares two lists of JSON values semantically.
func sameJSON(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !jsonEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func msgIDs(raw []json.RawMessage) string {
	var s []string
	for _, r := range raw {
		var m struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		}
		_ = json.Unmarshal(r, &m)
		s = append(s, m.Role+":"+m.ID)
	}
	return strings.Join(s, " ")
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

// idAt returns a well-formed event id whose ULID time is at.
func idAt(t *testing.T, at time.Time) string {
	t.Helper()
	seq, err := event.NewSequencer("", func() time.Time { return at })
	servertest.Must(t, err)
	id, _ := seq.Next()
	return id
}
