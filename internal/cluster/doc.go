// Package cluster is the foundation of metis's scale-out mode: several
// metis nodes sharing one NATS JetStream log (docs/scale-out.md).
//
// It owns:
//   - the log ([Log]): one JetStream stream whose subjects name the
//     delegation tree, the session and the family of each event
//     (metis.evt.<tree>.<session>.<c|s>); the event id is the message id,
//     so a retried publish is stored once; streaming events carry a
//     per-message TTL; subject filters replay a tree, a session or the
//     catalog family in id order;
//   - the record format ([EncodeRecord], [DecodeRecord]): a message body
//     is the event's exact envelope bytes, followed for a catalog event by
//     the store ops committed with it, so every node's projection writes
//     the same rows; the bytes of a group's images travel beside the
//     log, in a JetStream object store bucket named by their SHA-256,
//     put by the publisher before the record and got by each projection
//     before it applies it (images.go), so no message outgrows NATS's
//     max_payload; a deletion travels as a record of its own
//     (deletion.go: [Fence.PublishDeletion]), which every projection
//     applies by removing the session tree from its store;
//   - fencing ([Fence]): the owner of a tree publishes its catalog events
//     with the expected last sequence of the tree's catalog subjects, and
//     a stale writer is refused with [ErrFenced]; every message carries
//     its owner's epoch and the id of its previous event (epoch.go), so
//     readers drop a deposed owner's late streaming events and find the
//     ones that never reached the log; an owner confirms its lease
//     ([Owner.Confirm]) before its own clients get a streaming event;
//   - ownership ([Leases], [Lease], [Owner]): a lease per tree in a
//     JetStream key-value bucket, renewed by revision, expiring with the
//     bucket's TTL; losing it, or a fenced publish refused, cancels the
//     context the owner runs the tree's work under; a watch of the
//     bucket ([LeaseWatcher]) sees leases taken, expired and released,
//     so a dead owner's trees are taken over, and [Log.TreeTail] gives
//     the newest event id of a tree that a new owner's ids must follow;
//   - routing ([Router]): request/reply subjects that carry turn
//     submission, cancel and feedback from any node to the tree's owner,
//     the requests that change a session's running state (an approval's
//     answer, mode and cost limits, a compaction by hand, the session's
//     MCP servers: route_session.go), and the meta-events of other
//     nodes' clients, which only the owner
//     may emit into the tree ([MetaRequest]); each kind is a [Kind] with
//     its decoder, the owner answers with a [Handlers] table;
//   - the node directory ([Nodes]): each node announces itself (name,
//     address, start, version, how far its projection applied the log)
//     in a key-value bucket with a TTL, which `metis cluster status`
//     reads with the leases ([Leases.List]) and the log's catalog tail
//     ([Log.LastCatalogSeqAll]);
//   - committing ([Store]): the bus's store in cluster mode; a group is
//     published by the tree's owner, fenced, and reported committed only
//     once the stream acknowledged it and the node's projection applied
//     it; it also publishes the tree's streaming events, in id order with
//     the catalog groups (bus.StreamingStore);
//   - reading anywhere ([Projection], [Feeds]): each node applies the
//     catalog records to its own SQLite store in stream order and can
//     wait until it has applied a given sequence; a feed is one ordered
//     consumer per tree, fanning its events out to a local sink (with
//     NewAppliedFeeds, each catalog event only once the projection
//     applied it); [Log.Streaming] reads the streaming events of a tree
//     the log still holds, which a node backfills into its rings when
//     it starts following the tree ([Feeds.JoinAt] then starts the feed
//     right after them).
//
// cluster is a core package: it imports event and store, bus (for
// bus.ErrMoved, the error of an event of a tree this node no longer
// writes), and the NATS client (github.com/nats-io/nats.go and its
// jetstream package); it never imports a transport edge (api, stream,
// hub, server).
package cluster
