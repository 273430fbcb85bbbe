// Package tsgen generates web/src/client/protocol.gen.ts, the wire types
// of the TypeScript client, from the Go definitions they mirror: the
// wire vocabulary in protocol (the event catalog with every type, its
// family and the presets; the frames and their constants; the session
// summary) and the canonical message (internal/message). Struct
// fields are read by reflection from their json tags and constants from
// protocol's source, so a field or constant added in Go shows up in the
// TypeScript file; event payloads, which have no Go types, are declared
// here in a table that a test checks against the catalog and against
// the payloads of the recorded conformance traces.
//
// The committed file must equal what Generate writes: `go test
// ./web/tsgen/` fails on any drift, and `go generate ./web/tsgen/` (or
// the test with -update) rewrites it.
//
// tsgen is a build tool at the edge: it imports protocol and
// internal/message, and nothing imports it.
package tsgen

//go:generate go test -run TestGeneratedFileIsCurrent -update .
