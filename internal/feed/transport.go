package feed

import (
	"context"

	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// Transport is one client connection as the feed writes to it. Every
// method but Kill and Gone is called from the feed's goroutine only,
// under the feed's write deadline.
type Transport interface {
	// Write writes one frame (a server frame's JSON). cursor is the
	// event id a client resumes after once it holds the frame: the
	// event's id, the snapshot's snapshot_at_event_id, or "" for frames
	// that carry none (the ack, errors). Write may buffer until Flush.
	Write(cursor string, frame []byte) error
	// Flush sends what Write buffered.
	Flush() error
	// Heartbeat tells an idle client the connection is alive. nonce
	// names the ping, for transports whose client answers it.
	Heartbeat(nonce string) error
	// Close ends the stream with a close code and its reason, the way
	// the transport does (a close handshake, or a last frame and the end
	// of the response).
	Close(code int, reason protocol.CloseDetail) error
	// Kill drops the connection at once. It is called from any goroutine
	// (the write deadline's timer) and must make a write in progress, a
	// close handshake included, fail soon.
	Kill()
	// Gone is closed once the client has gone away.
	Gone() <-chan struct{}
}

// ItemWriter is implemented by transports that frame an event's frame
// further and share that framing between their clients (SSE: one
// encoding of the event's id: and data: lines per event, kept in the
// hub's item). The feed writes events through WriteItem instead of
// Write; it is Write(it.ID, it.Frame) on the wire.
type ItemWriter interface {
	WriteItem(it *hub.Item) error
}

// Receiver is implemented by transports whose client sends frames
// while subscribed (the WebSocket). The feed takes each frame from
// Inbox and hands it to Receive on its own goroutine, between writes,
// so replies go out through Feed.Send in order with everything else.
// Receive reports false to end the feed (a reply could not be written).
type Receiver interface {
	Inbox() <-chan Inbound
	Receive(ctx context.Context, in Inbound) bool
}

// Inbound is one frame a client sent.
type Inbound struct {
	Binary bool
	Data   []byte
}
