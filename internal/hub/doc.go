// Package hub is the transport-free heart of the streaming server: it is
// the bus's live sink, holds each session's attached clients and their
// bounded outbound queues, keeps a bounded ring of each session's recent
// streaming events, and answers a subscribe with a consistent snapshot or
// an exact replay joined to the live stream at a gap-free, duplicate-free
// seam (spec §3.7).
//
// The seam: a client is registered, and the id L of the last event the
// session delivered is read, atomically with respect to delivery (under
// the session emitter's outbox lock). Every event after L then reaches
// the client's queue; the snapshot is built as of L and the replay covers
// exactly (since, L], from the trace store (catalog events) merged by id
// with the ring (streaming events). Nothing is missed and nothing is
// sent twice, whatever arrives while the replay is read. A cursor of an
// earlier process that was never stored (a delta streamed when it
// stopped) is accepted only while every id this process gives the tree
// sorts after it, and refused otherwise (foreign.go).
//
// In cluster mode a node that starts following a tree owned elsewhere
// hands the hub, through the bus, the tree's streaming events the log
// still holds (Backfill): they fill the rings as if the node had
// delivered them, so a cursor taken on another node replays here.
//
// Only the owner of a tree emits into it in cluster mode: the hub hands
// the meta-events of its clients of a tree owned elsewhere (their
// subscriber_registered and _unregistered, a slow client's
// handler_warning) to Config.Forward, a hook the cluster code
// implements, and names its clients "stream-N@node" (Config.Node).
//
// Each event is framed once, in Publish, and the same bytes are queued
// for every client. Enqueueing is O(1) and never blocks; a full queue
// (by events, or by the bytes of their frames) marks the client too
// slow, and the feed serving it (internal/feed) closes it.
//
// A worker's approval requests reach every client of its planners,
// whatever their filter says of workers, and a snapshot lists the
// pending requests of the session and its workers (approvals.go). A
// snapshot also names the worker sessions delegated to (workers.go) and
// the tool calls running at its seam (running.go), which its messages
// alone cannot tell from calls not started yet.
//
// hub imports bus, event, message, metrics, protocol and store; it
// never imports a transport or the session manager.
package hub
