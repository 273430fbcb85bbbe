// Package store owns the trace store: the embedded SQLite database
// holding events, sessions, turns, messages and tool calls.
//
// Every write goes through one writer goroutine that owns the only
// write connection. Callers hand it groups of [Op] with [Store.Submit]
// (or [Store.Apply], which waits); the writer drains whatever has been
// queued, applies it in submission order in one transaction (group
// commit), commits, and only then reports each group's outcome. A group
// is atomic: either all of its ops are committed or none is, and one
// failing group never fails the others sharing its transaction.
//
// Reads run on a separate pool of read-only connections and see only
// committed data; with WAL they never block the writer, nor it them.
//
// Catalog events are stored as the exact envelope bytes they were sealed
// with, next to the columns needed to select them (session, id, type,
// turn, timestamp, actor) and a global append sequence (Event.Seq) that
// subscribers use to catch up. Event ids are "evt_"+ULID and strictly
// increase per session, so ranges by id are plain string comparisons.
//
// Tool call rows are keyed by (session, assistant message, tool_use id):
// providers' tool_use ids are unique only within a message.
//
// [Store.SetFault] is a test seam: a hook that fails chosen write
// transactions as a full disk would, to test that no storage failure
// loses a turn's end. With no hook installed it costs one atomic load
// per transaction.
//
// It imports event, message and protocol (for the session summary's
// shape) only, plus the driver, the pure-Go modernc.org/sqlite.
package store
