// Package session owns sessions and their turns: creating and listing
// sessions, admitting one turn at a time per session, running each turn
// on the agent loop in a goroutine the manager owns, cancelling turns
// (from a client, the turn timeout, or shutdown) exactly once, and
// recovering turns a crash left open. For long sessions it runs
// compactions by hand (holding the session's turn slot like a turn),
// shows the assembled system prompt and sets the session's cost limits
// (context.go).
//
// session imports agent, attach-free core packages (bus, compact, event,
// message, model, routing, store) and protocol (the payloads and reasons it
// emits); the HTTP and WebSocket edges import it.
package session
