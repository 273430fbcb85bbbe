package protocol

import "encoding/json"

// TypeClose is the last frame of a stream that has no close handshake
// of its own (SSE): the server sends it, then ends the response. It
// carries the code and reason a WebSocket close frame would.
const TypeClose = "close"

// MaxCloseReason is the most bytes a WebSocket close frame's reason may
// hold (RFC 6455 §5.5: 125 bytes of payload, two of them the code).
const MaxCloseReason = 123

// ReasonStorageFailure closes (1008) every live client of a session one
// of whose events could not be committed to the trace store (a full
// disk, an I/O error): that event is never delivered, and the client
// reconnects with its cursor to come back to a consistent point, as
// after client_too_slow. It is not the client's fault, so it has a
// reason of its own.
var ReasonStorageFailure = CloseReason{"storage_failure", "An event could not be stored; reconnect with replay."}

// CloseDetail is why the server ended a stream: the close reason, and
// the numbers that explain it where there are some (omitted when zero).
// The server's metrics, its log line and the reason the client gets are
// all made from one CloseDetail.
type CloseDetail struct {
	CloseReason
	// QueueEvents and QueueBytes: what the client's queue held when it
	// overflowed (client_too_slow).
	QueueEvents int   `json:"queue_events,omitempty"`
	QueueBytes  int64 `json:"queue_bytes,omitempty"`
	// StalledMS: how long the write in progress had been blocked when the
	// queue overflowed (client_too_slow), or the write timeout a write
	// exceeded (write_timeout), in milliseconds.
	StalledMS int64 `json:"stalled_ms,omitempty"`
	// MissedPings: the pings left unanswered (heartbeat_timeout).
	MissedPings int `json:"missed_pings,omitempty"`
}

// Encode returns the detail's JSON for a WebSocket close frame, never
// longer than MaxCloseReason bytes: numbers that do not fit are left
// out, the last first; then, if the code and message alone do not fit,
// the message.
func (d CloseDetail) Encode() string {
	for {
		b, _ := json.Marshal(d)
		if len(b) <= MaxCloseReason {
			return string(b)
		}
		switch {
		case d.MissedPings != 0:
			d.MissedPings = 0
		case d.StalledMS != 0:
			d.StalledMS = 0
		case d.QueueBytes != 0:
			d.QueueBytes = 0
		case d.QueueEvents != 0:
			d.QueueEvents = 0
		default:
			return d.CloseReason.Encode()
		}
	}
}

// CloseFrame is the close frame: the close code (1008, 1001) and the
// whole reason, numbers included.
type CloseFrame struct {
	Type   string      `json:"type"`
	Code   int         `json:"code"`
	Reason CloseDetail `json:"reason"`
}
