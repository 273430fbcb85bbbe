// Package stream is the WebSocket edge of the streaming protocol (spec
// §3–§4, §8): it redeems attach tokens, upgrades the connection, reads
// client frames and answers them, and waits for the subscribe. Once
// subscribed, the client is served by the transport-neutral core
// (internal/feed): the ack, the snapshot or replay, live events,
// heartbeats, overflow and the close codes. This package is the feed's
// WebSocket transport: frames, pings, the close handshake, and the
// teardown that unblocks a stalled write. The feed writes a batch of
// frames and then flushes it; the hijacked connection under the
// WebSocket library holds a batch's frames until that flush, so a
// replay leaves in writes of 64 KiB instead of one per frame.
//
// Files: server.go (the handler and shutdown), conn.go (one
// connection's lifecycle, and the feed's transport), batchconn.go (the
// connection that holds a batch), read.go (the reader goroutine and the
// client frames).
//
// stream is an edge: it imports feed, hub, attach, api (its JSON error
// body), protocol, metrics and the session manager's cancel; nothing in
// the core imports it.
package stream
