// Package protocol is the public home of the metis wire vocabulary:
// every name and shape a client of the HTTP API or the stream relies on
// (docs/protocol.md).
//
//   - the stream's frames, server to client and client to server
//     (spec §4), the filter, a strict decoder for client frames, which
//     are untrusted input, and a lenient one for server frames, for
//     clients (frames.go, client.go, server.go);
//   - the event catalog: every event type, its family, the presets and
//     the actors (events.go), and each event type's payload (payloads.go);
//   - the session summary and the other answers of the HTTP API, the
//     turn statuses and cancel results (session.go);
//   - the HTTP error codes and the JSON error body every edge answers with
//     (httperrors.go), and the stream's error and close codes and close
//     reasons (frames.go);
//   - the roles, statuses and block types of the canonical message
//     (message.go);
//   - the shell tool's result text and how to split it into exit code,
//     stdout and stderr (shellresult.go).
//
// Each wire name is spelled once, here; the server's packages use these
// constants (internal/event aliases the event names for the core).
// protocol imports only the standard library, so that any Go program can
// import it, and the client library imports nothing else of metis.
package protocol
