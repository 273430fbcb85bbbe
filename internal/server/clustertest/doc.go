// Package clustertest holds the tests of metis servers in cluster mode
// (docs/scale-out.md): several servers, each its own home, sharing
// in-process NATS servers with JetStream. They live in a package of
// their own so the single-node tests of internal/server never compile
// or start a NATS server.
//
// The first tests run two nodes on one standalone NATS server. The
// streaming spec's §11 suite runs on three (spec_*_test.go): a
// three-server NATS cluster on loopback ports, one metis node connected
// to each server, so the event stream has three replicas (startTrio
// checks it), created once per test; the ws and sse subtests of a test
// share it, each with sessions of its own. Node 0 creates the sessions
// and owns their trees; turns and cancels are sent to the other nodes
// too, and the clients spread over all three. What a client of any
// node gets is compared with what the owner delivered (its recorder),
// and with the owner's clients, byte for byte where the spec says
// identical. Each item of §11.1:
//
//   - 1, happy path: TestCluster11_1_1_HappyPathStream (a client on each
//     node; each node's messages endpoint already shows the turn when
//     its client has turn.completed).
//   - 2, snapshot consistency, and 16, the snapshot/replay seam:
//     TestCluster11_1_16_SnapshotReplaySeamOnNonOwners (snapshots and
//     cursors on the two non-owners while turns stream, on a node whose
//     feed runs and on one whose feed each round's first client starts).
//   - 3, reconnect with replay: TestCluster11_1_3_ReplayOfACursorTakenOnAnotherNode
//     (a cursor taken on one node, resumed on another that did not
//     follow the tree, mid-answer and after a turn it did not see).
//   - 4, replay too large: TestCluster11_1_4_ReplayLimitOnNonOwners, with
//     a limit of 6 rather than a 15,000-event gap: the count is the
//     serving node's, from its projection, and the size of the gap is
//     what internal/spectest's test is about.
//   - 5, cursor expired: TestCluster11_1_5_CursorExpiredOnNonOwners.
//   - 6, identical streams: TestCluster11_1_6_IdenticalStreamsFromEveryNode.
//   - 7, cancellation during the model's streaming, and 10, idempotent
//     cancel: TestCluster11_1_10_CancelOnOneNodeSeenByEveryNode (the
//     §6.2.1 sequence checked on every node's client).
//   - 8, 8b and 9, cancellation during tool dispatch, at the seam and
//     during delegation: the owner's agent loop produces these
//     sequences, whichever node the cancel came through (the cancel is
//     routed to it), and every node relays the owner's events as they
//     are; they are tested in internal/agent and internal/server, and
//     the delivery of a cancellation and of a delegation tree to other
//     nodes by 10 and 12.
//   - 11, slow client: TestCluster11_1_11_SlowClientIsolatedPerNode
//     (its bus.handler_warning, which the owner emits for the node
//     that closed it, on every node; meta_test.go checks its payload
//     and the subscription meta-events of a non-owner's clients).
//   - 12, workers hidden or included: TestCluster11_1_12_WorkerHiddenVsIncludedOnNonOwners.
//   - 13, filter validation: per connection, before anything of the
//     tree is read; TestCluster11_1_13_FilterValidationOnNonOwners checks
//     once that a non-owner refuses the same way.
//   - 14, unknown event types: a client's behaviour (internal/spectest
//     drives the test client with a stub server); no node is involved.
//   - 15, heartbeat: a timer of the connection on the node that serves
//     it (internal/feed), which does not depend on where the tree is
//     owned.
//
// A restarted node rebuilds its projection from the log:
// TestClusterNodeRestartRebuildsItsProjection (on its home and on an
// empty one, the same messages, snapshot and replay frames).
//
// Streaming events expire from the log after --streaming-ttl; a node
// that did not relay them answers a cursor before them with
// streaming_gap and every catalog event, as a single node whose ring
// let the deltas go: TestClusterExpiredDeltasReplayAsStreamingGap.
//
// The fault tests (fault_*_test.go; docs/scale-out.md, "Faults") run
// three nodes with a follower on each, a client that reconnects as the
// Go and TypeScript clients do (follower_test.go), through one fault,
// and check every follower against the log with checkDelivery: no
// event lost (unless a streaming gap it was told of covers it),
// duplicated, out of order or late. The owner, or the NATS servers,
// run as processes of the test binary (procnode_test.go, through
// servertest.StartChild, and natsproc_test.go), so that they can be
// paused with SIGSTOP, or killed with SIGKILL and restarted on their
// store; on Linux they die with the test binary, also when it panics
// on its timeout. A follower stops as soon as its test ends, and its
// waits have deadlines that fail the test with what it waited for.
// METIS_FAULT_RUNS repeats each fault test's run.
//
// The package has no code besides its tests.
package clustertest
