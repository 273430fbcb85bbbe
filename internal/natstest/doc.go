// Package natstest runs NATS servers with JetStream in process for the
// tests and benchmarks of cluster mode: one standalone server, or a
// cluster of servers routed to each other on loopback ports, each with
// JetStream on its own temporary directory, so streams can have three
// replicas. Servers shut down when the test ends.
//
// It imports only the NATS server; only tests and benchmarks import it
// (internal/layering keeps it out of the binary).
package natstest
