//go:build unix

package stream_test

// BenchmarkReplay10k: a reconnecting client replays 10,000 stored
// catalog events, against the floor (floor_test.go) writing the same
// frames, byte for byte, from memory over the same library.
//
// What it measures is what a black-box measurement of a running server
// sees:
//
//   - the history is made by real turns of builtin:demo with tools
//     (list_dir, read_file of a 3 KiB file, short echoes), so the events
//     are of a dozen types and sizes (from about 300 bytes to 4 KiB),
//     not 10,000 copies of one small row;
//   - the client subscribes with every catalog type in its filter (what
//     preset:full asks of the store), so the exact count and the read
//     go through the same filters a real client's do;
//   - the client runs in a child process (this test binary re-executed),
//     so this process is the server alone and its CPU time (getrusage,
//     every thread) around a replay is the server's CPU for it: attach,
//     subscribe, count, read, frame and write. The figure is reported
//     per replayed event (cpu_us/event), for metis and for the floor;
//   - the time (ms) runs in the client, from the attach request (floor:
//     the dial) to the last replayed frame read.
//
// Each iteration replays benchReps times per system, the two systems
// alternating, and reports medians. The store's pages are warm (a
// warm-up replay first); the SQLite page cache of whichever read
// connection serves a replay may not be.
//
// $METIS_STREAM_BENCH_REPLAYPROF names a file for a CPU profile of the
// measured replays (both systems), without the making of the history.

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/session"
)

// The replay client (benchtest.ReplayClient) runs in a child process:
// this test binary re-executed, dispatched here before the tests run.
func init() {
	if benchtest.IsReplayClient() {
		os.Exit(benchtest.ServeReplays())
	}
}

// benchHistory makes a session's history of real builtin:demo turns
// until it holds at least n catalog events, on a workspace in dir.
func benchHistory(tb testing.TB, m *benchMetis, dir string, n int) string {
	tb.Helper()
	ws := filepath.Join(dir, "workspace")
	benchtest.WriteHistoryWorkspace(tb, ws)
	sum, err := m.srv.Sessions.Create(context.Background(), session.CreateRequest{WorkspacePath: ws, Model: "builtin:demo"})
	if err != nil {
		tb.Fatal(err)
	}
	benchtest.RunHistory(tb, m.srv, sum.ID, n)
	return sum.ID
}

// replayRig is what the replay benchmarks replay from: a metis server
// whose session holds a history of more than benchReplay events, and
// the replay client.
type replayRig struct {
	m     *benchMetis
	sid   string
	em    *bus.Emitter
	child *benchtest.ReplayClient
	cur   *benchtest.Cursor
	types []string
}

// newReplayRig starts the rig: a server with a history made anew, its
// replay windows on.
func newReplayRig(b *testing.B) *replayRig {
	m := startBenchMetisWith(b, func(cfg *config.Config) { cfg.DemoDelay = 0 })
	return replayRigOn(b, m, benchHistory(b, m, b.TempDir(), benchReplay+200))
}

// newStoreReplayRig starts the rig of the store path: a server with
// the replay windows off (--replay-window-bytes=0), so that every
// replay reads the store, on storeHistory's home, made by the first
// call.
func newStoreReplayRig(b *testing.B) *replayRig {
	first := storeHistory.home == ""
	if first {
		dir, err := os.MkdirTemp("", "metis-replay-bench-")
		if err != nil {
			b.Fatal(err)
		}
		storeHistory.home = dir
	}
	m := startBenchMetisWith(b, func(cfg *config.Config) {
		cfg.DemoDelay = 0
		cfg.ReplayWindowBytes = 0
		cfg.Home = storeHistory.home
	})
	if first {
		storeHistory.sid = benchHistory(b, m, storeHistory.home, benchReplay+200)
	}
	return replayRigOn(b, m, storeHistory.sid)
}

// replayRigOn is the rig replaying session sid of m.
func replayRigOn(b *testing.B, m *benchMetis, sid string) *replayRig {
	em, err := m.srv.Bus.Emitter(context.Background(), sid)
	if err != nil {
		b.Fatal(err)
	}
	return &replayRig{m: m, sid: sid, em: em, child: benchtest.StartReplayClient(b),
		cur: benchtest.NewCursor(m.srv.Store, sid), types: benchtest.CatalogTypes()}
}

// once replays exactly benchReplay events on metis over kind
// (benchtest.ReplayMetis or ReplaySSE) and returns the client's result
// and this process's (the server's) CPU time for it. Each subscribe adds
// bus.subscriber_registered and _unregistered to the session: the
// cursor is taken anew before every replay, and the server is let to
// detach the client before the next.
func (r *replayRig) once(kind string, keep bool) (benchtest.ReplayResult, time.Duration, error) {
	ctx := context.Background()
	if err := r.em.Barrier(ctx); err != nil {
		return benchtest.ReplayResult{}, 0, err
	}
	since, err := r.cur.Since(benchReplay)
	if err != nil {
		return benchtest.ReplayResult{}, 0, err
	}
	runtime.GC()
	res, cpu, err := r.child.Do(benchtest.ReplayCmd{Kind: kind, URL: r.m.url, SID: r.sid, Since: since, Types: r.types, N: benchReplay, Keep: keep})
	if err != nil {
		return res, 0, err
	}
	if err := waitFor(func() bool { return r.m.srv.Hub.Clients(r.sid) == 0 }); err != nil {
		return res, 0, err
	}
	return res, cpu, nil
}

// BenchmarkReplay10k replays from the session's replay window (the
// cursor is inside it: the window holds up to --replay-limit events,
// 10,000, within its 32 MiB cap).
func BenchmarkReplay10k(b *testing.B) { benchReplay10k(b, newReplayRig(b)) }

// BenchmarkReplay10kStore is BenchmarkReplay10k with the replay windows
// off: every replayed event is read from the trace store. Its history
// is made once per process (storeHistory).
func BenchmarkReplay10kStore(b *testing.B) { benchReplay10k(b, newStoreReplayRig(b)) }

func benchReplay10k(b *testing.B, r *replayRig) {
	child := r.child
	metisOnce := func(keep bool) (benchtest.ReplayResult, time.Duration, error) {
		return r.once(benchtest.ReplayMetis, keep)
	}
	// Warm up (store pages, first-use allocations) and keep the frames
	// for the floor.
	warm, _, err := metisOnce(true)
	if err != nil {
		b.Fatal(err)
	}
	f := startFloor(warm.Frames)
	defer f.Close()
	floorOnce := func() (benchtest.ReplayResult, time.Duration, error) {
		runtime.GC()
		res, cpu, err := child.Do(benchtest.ReplayCmd{Kind: benchtest.ReplayFloor, URL: f.URL(), N: len(warm.Frames)})
		if err != nil {
			return res, 0, err
		}
		if err := waitFor(func() bool { return f.Clients() == 0 }); err != nil {
			return res, 0, err
		}
		return res, cpu, nil
	}
	if _, _, err := floorOnce(); err != nil {
		b.Fatal(err)
	}
	b.Logf("replay: %d events, %d bytes of frames (%d per event on average)", len(warm.Frames), warm.Bytes, warm.Bytes/int64(len(warm.Frames)))

	if path := os.Getenv("METIS_STREAM_BENCH_REPLAYPROF"); path != "" {
		// A CPU profile of the measured replays only (not of making the
		// history): this process is the server alone.
		pf, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			b.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			pf.Close()
		}()
	}
	var ms, cpu, ratio, cpuRatio [2][]float64 // [metis, floor]
	runs := map[string]func() (benchtest.ReplayResult, time.Duration, error){"metis": func() (benchtest.ReplayResult, time.Duration, error) { return metisOnce(false) }, "floor": floorOnce}
	for b.Loop() {
		for range benchReps {
			var got [2]benchtest.ReplayResult
			var used [2]time.Duration
			for _, name := range benchSystems() {
				k := 0
				if name == "floor" {
					k = 1
				}
				res, c, err := runs[name]()
				if err != nil {
					b.Fatalf("%s: %v", name, err)
				}
				got[k], used[k] = res, c
				ms[k] = append(ms[k], float64(res.NS)/1e6)
				cpu[k] = append(cpu[k], float64(c)/1e3/benchReplay)
			}
			ratio[0] = append(ratio[0], float64(got[0].NS)/float64(got[1].NS))
			cpuRatio[0] = append(cpuRatio[0], float64(used[0])/float64(used[1]))
		}
	}
	b.ReportMetric(benchtest.Median(ms[0]), "metis_ms")
	b.ReportMetric(benchtest.Median(ms[1]), "floor_ms")
	b.ReportMetric(benchtest.Median(ratio[0]), "ratio")
	b.ReportMetric(benchtest.Median(cpu[0]), "metis_cpu_us/event")
	b.ReportMetric(benchtest.Median(cpu[1]), "floor_cpu_us/event")
	b.ReportMetric(benchtest.Median(cpuRatio[0]), "cpu_ratio")
}

// BenchmarkReplay10kSSE is BenchmarkReplay10k's metis half over SSE:
// the same history, filter and cursor, replayed to a client in a child
// process that reconnects with GET /sessions/{id}/events?since=...;
// this process's CPU per replayed event, and the time in the client
// from the request to the last event read.
func BenchmarkReplay10kSSE(b *testing.B) {
	r := newReplayRig(b)
	once := func() (benchtest.ReplayResult, time.Duration, error) { return r.once(benchtest.ReplaySSE, false) }
	if _, _, err := once(); err != nil { // warm up
		b.Fatal(err)
	}
	var ms, cpu []float64
	for b.Loop() {
		for range benchReps {
			res, c, err := once()
			if err != nil {
				b.Fatal(err)
			}
			ms = append(ms, float64(res.NS)/1e6)
			cpu = append(cpu, float64(c)/1e3/benchReplay)
		}
	}
	b.ReportMetric(benchtest.Median(ms), "sse_ms")
	b.ReportMetric(benchtest.Median(cpu), "sse_cpu_us/event")
}
