// Package sse is the Server-Sent Events edge of the stream:
// GET /sessions/{id}/events. The subscribe is the request's query (and
// its Last-Event-ID header, which resumes after the last event a client
// received); a refused subscribe is an HTTP error with the API's JSON
// error body. Once open, the client is served by the transport-neutral
// core (internal/feed): every frame the WebSocket would send becomes
// one SSE event, its JSON in data: and, for events and the snapshot,
// the cursor in id:, so an EventSource's own reconnect resumes exactly.
// Heartbeats are comment lines; a server-side end (overflow, shutdown)
// sends a last close frame, then ends the response.
//
// github.com/tmaxmax/go-sse does the framing and reads Last-Event-ID;
// the subscription logic is the feed's. An event's record is framed
// once for every SSE client: its id: line and data: field name are
// kept in the hub's item (an hub.Encoding) and written around the
// shared frame, the same bytes go-sse writes. A batch of frames goes
// out through one pooled buffer, so a replay leaves in large writes.
//
// Files: server.go (the handler and shutdown), transport.go (the feed's
// transport over an SSE response), record.go (an event's shared SSE
// record), errors.go (refusals as HTTP errors).
//
// sse is an edge: it imports feed, hub, protocol, metrics and go-sse;
// nothing in the core imports it, and it imports no other edge.
package sse
