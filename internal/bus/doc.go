// Package bus owns event emission and dispatch inside one metis process.
//
// Every event, of either family, is emitted through the Emitter of its
// session, which assigns its id from the session's Sequencer and encodes
// it once. Catalog events are then committed to the trace store (grouped
// with the store writes they describe) and only after the commit are they
// delivered, in id order, to bus subscribers and to the live sink (the
// streaming server). Streaming events skip the store and the subscribers
// and go to the live sink alone, but wait in the same per-session outbox
// so the live sink sees one gap-free, id-ordered sequence per session.
//
// Delivery never blocks the emitter: each subscriber has a bounded queue
// and its own goroutine; a subscriber that falls behind is marked lagging,
// a bus.handler_warning is emitted, and it catches up from the trace
// store. The live sink must accept events without blocking.
//
// In cluster mode (docs/scale-out.md) the store is the cluster's log:
// it also gets the streaming events (StreamingStore), in id order with
// the catalog groups, and events another node committed are handed to
// the live sinks with Relay, in their tree's outbox, so the seam holds
// for them too. The delivery point of a tree the bus relays moves only
// with what it relays and with Backfill, CatchUp and Resume: an emitter
// made from the store for one of its sessions (a worker's) never moves
// it, since the store may be ahead of the relayed events.
//
// bus imports event and store (for its Op types and reads); it never
// imports a transport.
package bus
