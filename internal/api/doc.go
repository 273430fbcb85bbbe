// Package api owns the HTTP API of contract §3 (sessions, turns,
// cancellation, message history; the MCP servers' status and a
// session's MCP servers, mcp.go), the local-safety guard of contract §6
// that every request, the WebSocket upgrade included, passes first, and
// the bearer-token middleware (with POST /login for browsers) that comes
// right after it when the server is reachable from the network.
//
// api is an edge: it imports session, attach, message, mcp (its error
// sentinels) and protocol (whose error codes, error body and answer
// types it sends), and nothing
// in the core or another edge imports it. The WebSocket stream endpoint
// is mounted on the same mux by the streaming server.
package api
