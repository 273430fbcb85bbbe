// Package clusternode is a metis server's runtime as one node of a
// cluster (metis serve --nats; docs/scale-out.md): the rules a node
// follows, in one place, on top of the log, leases, routing and feeds
// of internal/cluster.
//
// It owns:
//   - starting and stopping the node: the NATS connection, the log and
//     the lease bucket, the projection of the log into the node's
//     store, the cluster store the bus commits through (node.go);
//   - ownership: which trees this node owns, taking a tree (its lease,
//     its fence, the hand-over of the bus's ids and seam), losing one
//     (the tree's work stops here) and failover, taking over the trees
//     of dead owners as their leases expire (failover.go);
//   - the owner's side of routed requests (submit, cancel, feedback,
//     meta-events; approvals, mode and cost limits, compactions and a
//     session's MCP servers in handlers_session.go), answered with the
//     session manager (and the MCP manager), and the stream's cancel
//     frame sent to a tree's owner (handlers.go);
//   - following a tree owned elsewhere for this node's clients: the
//     feed, the backfill of the in-flight ring, the seam (follow.go),
//     a cursor taken on another node (cursor.go), reads that catch up
//     with the log first (reads.go);
//   - the meta-events of this node's clients of trees owned elsewhere,
//     sent to their owners (meta.go);
//   - what the node shows operators: the node directory, the cluster
//     metrics and the cluster's status (status.go).
//
// clusternode is a core package: it imports the core (cluster, bus,
// session, store, metrics, config) and protocol, never a transport.
// HTTP belongs to internal/api (ClusterFront: routing a request to the
// tree's owner, following a tree for a stream, GET /cluster), and
// internal/server wires the node into a server.
package clusternode
