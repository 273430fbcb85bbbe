// Package protocol defines the wire format of the metis stream (spec §4):
// every frame the server sends and the client sends, the event filter and
// its presets, a strict decoder for client frames, which are untrusted
// input, and a lenient one for server frames, for clients. It is public so that Go clients can share the exact
// types the server uses.
//
// protocol imports the event catalog (to resolve presets and validate
// filters) and nothing else from metis; the streaming server and the
// client library import it.
package protocol
