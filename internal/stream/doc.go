// Package stream is the WebSocket edge of the streaming protocol (spec
// §3–§4, §8): it redeems attach tokens, upgrades the connection, reads
// and answers client frames, and writes each client's frames in order,
// one writer per connection, with a write deadline, heartbeats and the
// close codes of the protocol. What to send, and the seam between replay
// and live events, is the hub's business.
//
// Files: server.go (the handler and shutdown), conn.go (one connection's
// lifecycle), read.go (the reader goroutine), write.go (frame writing
// with the deadline), heartbeat.go (pings).
//
// stream is an edge: it imports hub, attach, protocol, metrics and the
// session manager's cancel; nothing in the core imports it.
package stream
