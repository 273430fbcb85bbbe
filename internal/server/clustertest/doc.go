// Package clustertest holds the tests of metis servers in cluster mode
// (docs/scale-out.md): several servers, each its own home, sharing one
// in-process NATS server with JetStream. They live in a package of
// their own so the single-node tests of internal/server never compile
// or start a NATS server.
//
// The package has no code besides its tests.
package clustertest
