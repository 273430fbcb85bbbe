// Package clusterbench holds the benchmarks of metis in cluster mode
// (docs/scale-out.md) measured against single-node metis in the same
// run (docs/benchmarks.md, "Cluster"): delta latency from the adapter
// to a client of another node, fan-out to 300 clients over three nodes,
// catalog commit throughput with one and three replicas, and replay of
// 10,000 events on a cold and a warm node.
//
// The NATS servers run in process (internal/natstest): one standalone
// server for replicas 1, a three-server cluster on loopback ports for
// replicas 3. The metis nodes and the single-node server run in the
// benchmark's process too.
//
// The benchmarks have a package of their own, with a TestMain of its
// own, because the replay benchmark re-executes the test binary as its
// client process (so the server's CPU time is measured without the
// client's), which TestMain must dispatch before anything else runs;
// and because their harness (three systems side by side, hundreds of
// clients) has no business in the compile of the cluster tests of
// internal/server/clustertest.
//
// The package has no code besides its tests and benchmarks.
package clusterbench
