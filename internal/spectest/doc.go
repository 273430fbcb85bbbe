// Package spectest holds the streaming spec's §11 suite, run over every
// transport of the stream. Each numbered requirement of §11.1 about what
// a client sees is a test named after it
// (TestSpec11_1_3_ReconnectWithReplay), with one subtest per transport,
// "ws" and "sse", driving a whole server (internal/servertest) through
// the clients of internal/streamtest; so are the lifecycle tests
// (disconnect, shutdown, write timeout, overflow, resync). Where a test
// needs a costly setup (a 15,000-event gap), the transports share it.
// The package has no code of its own: it is tests only. Its tests import
// servertest and streamtest, and what they check the server against:
// event, store, message, protocol, the API's error codes, config,
// and stream (to mount a WebSocket server with a short subscribe
// timeout); a server a test kills runs in a child process
// (servertest.StartChild).
//
// WebSocket-only, because SSE has no such thing:
//   - client frames: malformed, unknown and binary frames, the 1 MiB
//     frame limit, two subscribes back to back on one connection, the
//     cancel frame and its errors (TestProtocol*, TestCancelIsScoped…);
//     over SSE the client sends nothing on the stream, and cancels with
//     POST …/cancel, which TestSpec11_1_10_IdempotentCancel/sse uses;
//   - client pings and pongs and heartbeat_timeout: SSE's heartbeats are
//     comment lines no client answers (TestSpec11_1_15_Heartbeat/sse
//     checks them), and a dead SSE peer is found by a failing write;
//   - the subscribe timeout: an SSE request is its subscribe;
//   - attach tokens and the upgrade's guard: the SSE stream is a plain
//     API route (TestSSE_RouteGuards checks its guard and token).
//
// SSE-only (TestSSE_*): the response's headers and framing, Last-Event-ID
// overriding the URL's since and snapshot, refusals as HTTP statuses
// with the JSON error body, the route's guards, a WebSocket client and
// an SSE client seeing byte-identical frames, and curl as a client. The
// close event that ends an SSE response (overflow, shutdown, resync) is
// checked in the sse halves of the tests of those ends, and the client
// resumes from it with Last-Event-ID in TestSpec11_1_11_SlowClientClosed.
//
// Besides §11.1: TestContract11_MidStreamSnapshot is the mid-stream
// snapshot of the contract's §11 (a snapshot taken while an answer
// streams carries it so far, and the deltas after the seam continue it
// exactly), a rapid property over both transports; and
// TestCrashMidCallReportsStreamingGap kills a server running in a child
// process (this test binary again, see TestMain) mid-answer and checks
// that a client resuming from one of its deltas is told of the gap.
//
// §11.1 items 7, 8, 8b and 9 (cancellation sequences) do not depend on
// the transport and are tested in internal/agent and internal/server.
// The seam over random interleavings of subscribes and emission is a
// property test of the hub (internal/hub, TestSeamExactlyOnce).
package spectest
