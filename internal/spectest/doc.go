// Package spectest holds the streaming spec's §11 suite, run over every
// transport of the stream: each numbered requirement of §11.1 that is
// about what a client sees is a test named after it
// (TestSpec11_1_3_ReconnectWithReplay), with one subtest per transport
// ("ws", "sse") driving a whole server (internal/servertest) through the
// clients of internal/streamtest. The package has no code of its own;
// it is tests only.
//
// Some tests are WebSocket-only by nature, because SSE has no such
// thing: client frames in general (binary frames, malformed and unknown
// frames, the 1 MiB frame limit, two subscribes back to back on one
// connection, the cancel frame and its errors), client pings and pongs
// (SSE's heartbeats are comments a client never answers, so there is no
// heartbeat_timeout), the subscribe timeout (an SSE request is its
// subscribe), and attach tokens (the SSE stream is a plain API route).
// Others are SSE-only: Last-Event-ID, refusals as HTTP statuses, the
// close event, comment heartbeats, and one WebSocket and one SSE client
// of a session seeing the same frames.
//
// Tests in other packages cover §11.1 items 7, 8, 8b and 9
// (cancellation sequences, in internal/agent and internal/server), which
// do not depend on the transport.
package spectest
