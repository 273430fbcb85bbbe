// Package agent owns the agent loop: one turn of a session, from routing
// through model calls and tool dispatch to the turn's end. It emits the
// catalog and streaming events of the spec (§5.3) in canonical order
// through the session's bus.Emitter, persists messages and tool calls
// atomically with the events that describe them, and turns a cancelled
// context into exactly one of the cancellation sequences of spec §6.2.
//
// It also owns what a long session needs around each call
// (docs/context.md): the system prompt with the workspace's and the
// home's AGENTS.md (prompt.go), the compaction of a conversation that
// would pass its model's window and the recovery from a provider's
// overflow (context.go, compact.go, over internal/compact), and the
// turn's and session's cost limits (budget.go).
//
// Before a tool call starts, the turn's Permissions (the session
// manager, with internal/permission's policy) decide it: it runs, is
// refused (tool.failed, permission_denied), or asks the user
// (approval.requested) and waits for the resolution
// (approval.resolved); see docs/permissions.md.
//
// agent imports bus, compact, event, message, model, permission,
// protocol, routing, safefile, store (op types), tool and price. It never imports a
// transport or the session manager.
package agent
