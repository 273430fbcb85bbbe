package protocol

import "encoding/json"

// Frame types, server to client.
const (
	TypeSnapshot       = "snapshot"
	TypeEvent          = "event"
	TypeSubscribeAck   = "subscribe_ack"
	TypeSubscribeError = "subscribe_error"
	TypeError          = "error" // a client frame was refused; the connection stays open
)

// Frame types, client to server.
const (
	TypeSubscribe = "subscribe"
	TypeCancel    = "cancel"
)

// Frame types, both directions.
const (
	TypePing = "ping"
	TypePong = "pong"
)

// Subscribe error codes (spec §4.2), plus invalid_cursor (a cursor past
// the session's last event) and internal (the server could not read the
// session; the client may retry), which this server adds. A client that
// never subscribes is closed with ReasonSubscribeTimeout, not refused
// with a subscribe_error.
const (
	CodeSessionNotFound = "session_not_found"
	CodeCursorExpired   = "cursor_expired"
	CodeReplayTooLarge  = "replay_too_large"
	CodeInvalidFilter   = "invalid_filter"
	CodeInvalidCursor   = "invalid_cursor"
	CodeInternal        = "internal"
)

// Error frame codes for refused client frames.
const (
	CodeInvalidJSON      = "invalid_json"
	CodeInvalidFrame     = "invalid_frame"
	CodeUnknownFrameType = "unknown_frame_type"
	CodeAlreadySubscribe = "already_subscribed"
	CodeCancelFailed     = "cancel_failed"
)

// Close codes and reasons. The reason of a WebSocket close frame is at
// most 123 bytes; every reason here is a compact JSON object well under
// that (a test checks).
const (
	// ClosePolicyViolation (1008) closes a slow client (spec §8.2), a
	// client whose heartbeats stopped, and a client that never subscribed.
	ClosePolicyViolation = 1008
	// CloseTooBig (1009) closes a client whose frame exceeds the limit.
	CloseTooBig = 1009
	// CloseGoingAway (1001) is sent when the server shuts down.
	CloseGoingAway = 1001
)

// CloseReason is the JSON body of a close frame's reason.
type CloseReason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Close reasons the server sends.
var (
	ReasonClientTooSlow    = CloseReason{"client_too_slow", "Outbound queue overflowed; reconnect with replay."}
	ReasonHeartbeatTimeout = CloseReason{"heartbeat_timeout", "No pong to the last pings; reconnect."}
	ReasonSubscribeTimeout = CloseReason{"subscribe_timeout", "No subscribe frame after connecting."}
	ReasonShutdown         = CloseReason{"server_shutdown", "The server is shutting down; reconnect later."}
	ReasonWriteTimeout     = CloseReason{"write_timeout", "A write did not complete in time; reconnect with replay."}
	// ReasonResync closes (1008), in cluster mode, a client that missed
	// events this node cannot send it live: events its owner published
	// never reached the log (the replay then says streaming_gap).
	ReasonResync = CloseReason{"resync", "Events could not be delivered live; reconnect with replay."}
	// ReasonOwnerChanged closes (1008), in cluster mode, the clients of
	// a node that lost the session's delegation tree to another node:
	// they reconnect (to any node) and follow the tree from the log.
	ReasonOwnerChanged = CloseReason{"owner_changed", "Another node runs this session now; reconnect with replay."}
)

// Encode returns the reason's JSON, never longer than 123 bytes.
func (r CloseReason) Encode() string {
	b, _ := json.Marshal(r)
	if len(b) > 123 {
		b, _ = json.Marshal(CloseReason{Code: r.Code})
	}
	return string(b)
}

// Filter is the subscription filter (spec §3.2). EventTypes nil means
// every type; Actors nil means every actor.
type Filter struct {
	EventTypes            []string `json:"event_types"`
	Actors                []string `json:"actors"`
	IncludeWorkerSessions bool     `json:"include_worker_sessions"`
}

// Snapshot is the snapshot frame.
type Snapshot struct {
	Type              string            `json:"type"`
	Session           json.RawMessage   `json:"session"` // a SessionSummary
	Messages          []json.RawMessage `json:"messages"`
	HasMoreMessages   bool              `json:"has_more_messages"`
	SnapshotAtEventID string            `json:"snapshot_at_event_id"`
	// Workers (a metis extension) are the session's latest delegations
	// as of the snapshot, oldest first: what its delegate.* events said
	// of each worker. A client rebuilds its worker cards from them.
	Workers []SnapshotWorker `json:"workers,omitempty"`
	// RunningTools (a metis extension) are the tool_use ids of the turn
	// in flight whose calls had started (tool.called) and not ended at
	// the seam, in the order they started. A tool_use of the messages
	// with no result and not listed here has not started: it waits for
	// an approval (the summary's pending_approvals) or its turn to run.
	RunningTools []string `json:"running_tools,omitempty"`
}

// SnapshotWorker is a worker session as the planner's delegate.* events
// describe it.
type SnapshotWorker struct {
	SessionID   string  `json:"session_id"`
	Task        string  `json:"task"`
	Model       string  `json:"model"`
	Status      string  `json:"status"` // running, completed, failed
	Summary     string  `json:"summary,omitempty"`
	FailureMode string  `json:"failure_mode,omitempty"`
	CostUSD     float64 `json:"cost_usd"`
}

// SubscribeAck acknowledges a subscribe. StreamingGap is true when
// streaming events (deltas) between Since and the live stream are no
// longer held by the server: the replay carries every catalog event but
// some deltas are missing, so the client must rebuild in-flight messages
// from message.complete or GET /sessions/{id}/messages.
type SubscribeAck struct {
	Type             string  `json:"type"`
	ResolvedFilter   Filter  `json:"resolved_filter"`
	Since            *string `json:"since"`
	Snapshot         bool    `json:"snapshot"`
	ReplayEventCount int     `json:"replay_event_count"`
	StreamingGap     bool    `json:"streaming_gap"`
	// SeamEventID is the id of the last event covered by the snapshot or
	// replay: every live event that follows is newer. A client that
	// subscribed without snapshot or cursor can resume from it.
	SeamEventID string `json:"seam_event_id"`
}

// SubscribeError refuses a subscribe. Offending names the filter entry
// that caused invalid_filter.
type SubscribeError struct {
	Type      string `json:"type"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Offending string `json:"offending,omitempty"`
}

// Error refuses one client frame; the connection stays open.
type Error struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Heartbeat is a ping or pong frame.
type Heartbeat struct {
	Type  string `json:"type"`
	Nonce string `json:"nonce"`
}

// EventEnvelope is an event as clients decode it (contract §4).
type EventEnvelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	TurnID    *string         `json:"turn_id"`
	TS        string          `json:"ts"`
	Actor     string          `json:"actor"`
	Payload   json.RawMessage `json:"payload"`
}

var (
	eventPrefix = []byte(`{"type":"event","event":`)
	eventSuffix = []byte(`}`)
)

// EventFrame wraps an encoded envelope in an event frame without
// re-encoding it.
func EventFrame(envelope []byte) []byte {
	b := make([]byte, 0, len(eventPrefix)+len(envelope)+len(eventSuffix))
	b = append(b, eventPrefix...)
	b = append(b, envelope...)
	return append(b, eventSuffix...)
}

// Marshal encodes a server frame. It panics on a value that cannot be
// encoded, which would be a programming error.
func Marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("protocol: marshal frame: " + err.Error())
	}
	return b
}
