package protocol

import "time"

// CodeNotClustered answers (404) GET /cluster on a server that runs
// single-node (started without --nats): there is no cluster to show.
const CodeNotClustered = "not_clustered"

// ClusterStatus is the answer of GET /cluster in cluster mode: the
// nodes of the cluster, the leases of the delegation trees, and how far
// each node's projection follows the log, as the answering node sees
// them at At.
type ClusterStatus struct {
	// Node is the name of the node that answered.
	Node string `json:"node"`
	// NATS names the NATS cluster the node is connected to (the
	// server's name when it is standalone); Stream is the log's stream.
	NATS   string    `json:"nats"`
	Stream string    `json:"stream"`
	At     time.Time `json:"at"`
	// LastCatalogSeq is the stream sequence of the log's newest catalog
	// message, of any tree: a node whose projection applied it shows
	// every catalog event committed so far.
	LastCatalogSeq uint64 `json:"last_catalog_seq"`
	// Nodes are the nodes that announced themselves within the
	// directory's TTL, by name.
	Nodes []ClusterNode `json:"nodes"`
	// Leases are the trees' leases held now, by tree, at most
	// MaxClusterLeases of them; LeasesTruncated says there were more.
	Leases          []ClusterLease `json:"leases"`
	LeasesTruncated bool           `json:"leases_truncated"`
}

// MaxClusterLeases bounds the leases GET /cluster lists.
const MaxClusterLeases = 1000

// ClusterNode is one node of a ClusterStatus.
type ClusterNode struct {
	Name string `json:"name"`
	// Address is the node's HTTP base URL ("" before it listens).
	Address string    `json:"address"`
	Started time.Time `json:"started"`
	Version string    `json:"version"`
	// Heartbeat is when the node last announced itself; AppliedSeq is
	// how far its projection had applied the log then (live for the
	// answering node).
	Heartbeat  time.Time `json:"heartbeat"`
	AppliedSeq uint64    `json:"applied_seq"`
	// Lag is LastCatalogSeq minus AppliedSeq (0 when caught up), in
	// stream sequences.
	Lag uint64 `json:"lag"`
	// OwnedTrees counts the leases of Leases this node holds.
	OwnedTrees int `json:"owned_trees"`
	// Self marks the node that answered.
	Self bool `json:"self"`
}

// ClusterLease is one tree's lease in a ClusterStatus.
type ClusterLease struct {
	Tree string `json:"tree"`
	// Node holds the lease: it owns the tree.
	Node     string `json:"node"`
	Revision uint64 `json:"revision"`
	// AcquiredAt is when Node took the lease, RenewedAt when it last
	// renewed it; AgeSeconds is At minus AcquiredAt.
	AcquiredAt time.Time `json:"acquired_at"`
	RenewedAt  time.Time `json:"renewed_at"`
	AgeSeconds float64   `json:"age_seconds"`
}

// CodeClusterUnavailable answers (503) GET /cluster when the node could
// not read the cluster's state from NATS in time: retry.
const CodeClusterUnavailable = "cluster_unavailable"
