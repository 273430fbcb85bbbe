// Package layering holds no code: its test enforces the dependency rules
// of docs/architecture.md over `go list -deps`, so that a change that
// breaks them fails `go test ./...` with the offending import chain.
//
// The rules, by kind of package (paths relative to the module):
//
//   - public: protocol imports nothing from metis; client imports only
//     protocol. Both are safe to import from other programs.
//   - core: the packages listed in coreRules (a pattern ending in "/..."
//     covers a subtree, so a new model provider under internal/model is
//     core). The core imports only the core and protocol, and never a
//     transport or user-interface library (WebSocket, SSE framing, the
//     terminal UI, the editor protocol). Inside the core, coreOrder keeps
//     the rings from inverting (the hub never imports the session
//     manager, the store never imports the bus, ...).
//   - composition roots: cmd/metis and internal/server wire everything
//     together and may import anything.
//   - test support: internal/servertest, internal/streamtest,
//     internal/spectest, internal/natstest, internal/benchtest and
//     internal/benchtest/cpu may import anything, and only tests import
//     them.
//   - edges: every other package of the module, including packages not
//     written yet. An edge may import the core, protocol and client, but
//     never another edge (the exceptions are listed in edgeExceptions,
//     each with its reason).
package layering
