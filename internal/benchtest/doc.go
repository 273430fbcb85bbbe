// Package benchtest holds what the benchmarks of the streaming server
// (internal/stream) and of cluster mode (internal/server/clusterbench)
// share, so that both measure the same way:
//
//   - the delta frames they time: the text every benchmark delta
//     carries (a sequence number, then a few words), its parse, and a
//     Reader that records when each one arrived (reader.go, delta.go);
//   - the WebSocket client's attach and subscribe, and the read of
//     whole frames and of replayed events (dial.go, frames.go);
//   - the child process: the test binary re-executed as the client, so
//     that the benchmark's process is the server alone and its CPU time
//     is the server's (child.go), and the replay client that runs in it
//     with its line protocol with the parent (replay.go);
//   - the replayed history (real builtin:demo turns) and the cursor
//     that exactly n stored events follow (history.go, cursor.go);
//   - CPU accounting with getrusage, the file-descriptor limit, and the
//     percentiles and medians every figure is reported as (cputime.go,
//     nofile.go, stats.go).
//
// It may import anything (it starts no server of its own, but drives
// internal/server's); only tests and benchmarks import it
// (internal/layering keeps it out of the binary).
package benchtest
