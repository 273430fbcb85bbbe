// Package session owns sessions and their turns: creating and listing
// sessions, admitting one turn at a time per session, running each turn
// on the agent loop in a goroutine the manager owns, cancelling turns
// (from a client, the turn timeout, or shutdown) exactly once, and
// recovering turns a crash left open. For long sessions it runs
// compactions by hand (holding the session's turn slot like a turn),
// shows the assembled system prompt and sets the session's cost limits
// (context.go). It also keeps each session's
// permission mode and the approval requests of its turns
// (approvals.go): they are decided once, under the lock cancels take,
// by the first of an answer, the timeout, a session rule, a mode
// change and a cancel (docs/permissions.md).
//
// session imports agent, attach-free core packages (bus, compact, event,
// message, model, routing, store) and protocol (the payloads and reasons it
// emits); the HTTP and WebSocket edges import it.
package session
