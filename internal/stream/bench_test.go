//go:build unix

package stream_test

// Performance benchmarks of the streaming server, each measured side by
// side with the floor of floor_test.go (a bare coder/websocket
// broadcaster writing the same pre-encoded frames through one writer
// goroutine per client). Every figure is a custom metric; ns/op is the
// wall time of one whole measurement and means nothing by itself.
//
//	BenchmarkLatency/clients={1,10,100}/{metis,floor}  p50_us p99_us
//	    text.delta latency at 1,000 deltas/s (paced by sleeping to a
//	    schedule), from just before the emit (metis: bus.Emitter.Emit,
//	    the adapter's path: id, encode, outbox, hub fan-out, queue,
//	    writer, socket; floor: the broadcast of a pre-encoded frame) to
//	    the client's read of the frame; every client's deltas pooled.
//	    deltas/s is the rate actually achieved.
//	BenchmarkFanout/clients=100/{metis,floor}          frames/s
//	    deltas emitted as fast as possible; frames delivered to all
//	    clients / time until the last client read the last one. emit_ms
//	    is the time the emitting goroutine took.
//	BenchmarkReplay10k                                  metis_ms floor_ms ratio
//	    a reconnecting client replays 10,000 stored catalog events of
//	    real builtin:demo turns, the client in a child process so the
//	    server's CPU per replayed event is measured too; see
//	    bench_replay_test.go.
//	BenchmarkOverflowClose/clients=10                   overflow_to_close_ms
//	    metis only (the floor has no slow-client policy): the latency
//	    run at 1,000 deltas/s with the default client queue, once with 10
//	    reading clients and once with the same 10 plus one client that
//	    never reads (a 2 KiB receive buffer, so its socket fills);
//	    p99_us_alone and p99_us_wedged are the readers' p99 in each,
//	    p99_ratio the median of the per-iteration ratios (the two runs of
//	    an iteration alternate in order), overflow_to_close_ms the time
//	    from the never-reader's client_too_slow warning to its
//	    bus.subscriber_unregistered (its connection gone and its queue
//	    released), both stamped by the server.
//	BenchmarkIdleConnMemory/{metis,floor}              KiB/conn
//	    server HeapInuse+StackInuse per idle subscribed connection (after
//	    runtime.GC), the clients living in a child process (this test
//	    binary re-executed) so the delta is server-side only.
//
// Clients and servers of the latency, fan-out and overflow benchmarks
// share this process (and its
// cores); the client code is the same for metis and the floor. cpu_*
// metrics are this process's CPU time (getrusage, every thread) per
// unit of work: on a shared machine they move far less with other
// processes' load than the wall-clock figures. alloc_B/* and GCs come
// from runtime.MemStats over the measured part.
//
// Each sub-benchmark does a fixed amount of work per b.Loop iteration;
// run with -benchtime=1x and repeat for medians, preferably as separate
// processes alternating which system goes first
// ($METIS_STREAM_BENCH_FLOOR_FIRST), since -count repeats one
// sub-benchmark back to back:
//
//	go test -run '^$' -bench . -benchtime 1x -count 5 ./internal/stream/
//
// Benchmarks only run with -bench; the child-process hook (init) only
// acts when its environment variable is set. Other knobs:
// $METIS_STREAM_BENCH_HEAPPROF writes a heap profile while the idle
// connections are held; $METIS_STREAM_BENCH_GCS sets the collections
// run before reading MemStats.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/benchtest/cpu"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

const (
	benchTurn   = "turn_bench"
	benchMsgID  = "msg_01JBENCHBENCHBENCHBENCHBENC"
	benchRate   = 1000                    // deltas/s for the latency benchmark
	benchLatDur = 2500 * time.Millisecond // measured part of a latency run
	benchWarm   = 300                     // warm-up deltas, not measured
	benchFanout = 10000                   // deltas per fan-out run
	benchReplay = 10000                   // events replayed
	benchReps   = 7                       // reconnects per replay run
	benchIdle   = 500                     // idle connections
)

// benchDeltaFrames pre-encodes n text.delta event frames exactly as metis
// frames them (a sealed event.Event wrapped by protocol.EventFrame).
func benchDeltaFrames(n int) [][]byte {
	seq, _ := event.NewSequencer("", nil)
	sid := event.NewID("sess_")
	out := make([][]byte, n)
	for i := range out {
		id, ts := seq.Next()
		payload, err := json.Marshal(benchtest.DeltaPayload{MessageID: benchMsgID, Text: benchtest.DeltaText(i)})
		if err != nil {
			panic(err)
		}
		ev := &event.Event{ID: id, Type: event.TextDelta, SessionID: sid, TurnID: benchTurn, TS: ts, Actor: event.ActorModel,
			Payload: payload}
		if err := ev.Seal(); err != nil {
			panic(err)
		}
		out[i] = protocol.EventFrame(ev.JSON())
	}
	return out
}

// ---------------------------------------------------------------------------
// metis under test

type benchMetis struct {
	srv *server.Server
	url string
	sid string
	em  *bus.Emitter
	hc  *http.Client
}

// startBenchMetis starts a real server on loopback with a fresh home and
// one session. It does not use servertest.Start because that adds a
// recording live sink which keeps every event, a cost (a lock and an
// append per event, memory per event) production does not have.
func startBenchMetis(tb testing.TB, clientQueue int) *benchMetis {
	tb.Helper()
	return startBenchMetisWith(tb, func(cfg *config.Config) {
		cfg.DemoDelay = 0
		if clientQueue > 0 {
			cfg.ClientQueue = clientQueue
		}
	})
}

// startBenchMetisWith starts a metis server on a loopback port with
// the defaults as set changes them, and creates one session.
func startBenchMetisWith(tb testing.TB, set func(*config.Config)) *benchMetis {
	tb.Helper()
	home := tb.TempDir()
	ws := filepath.Join(home, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		tb.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Home = home
	cfg.Addr = "127.0.0.1:0"
	set(&cfg)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		tb.Fatal(err)
	}
	url, err := srv.Listen()
	if err != nil {
		tb.Fatal(err)
	}
	m := &benchMetis{srv: srv, url: url, hc: &http.Client{Transport: &http.Transport{}}}
	tb.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		m.hc.CloseIdleConnections()
	})
	sum, err := srv.Sessions.Create(ctx, session.CreateRequest{WorkspacePath: ws})
	if err != nil {
		tb.Fatal(err)
	}
	m.sid = sum.ID
	if m.em, err = srv.Bus.Emitter(ctx, m.sid); err != nil {
		tb.Fatal(err)
	}
	return m
}

// emitDelta is the model adapter's emit of one text delta.
func (m *benchMetis) emitDelta(text string) error {
	_, err := m.em.Emit(bus.Spec{Type: event.TextDelta, TurnID: benchTurn, Actor: event.ActorModel,
		Payload: benchtest.DeltaPayload{MessageID: benchMsgID, Text: text}})
	return err
}

// ---------------------------------------------------------------------------
// the two systems behind one interface

type benchSystem interface {
	// connect opens n clients, subscribed to text.delta and registered
	// for live delivery.
	connect(tb testing.TB, n int) []*websocket.Conn
	// send emits (metis) or broadcasts (floor) delta seq.
	send(seq int) error
}

type metisSystem struct {
	m     *benchMetis
	texts []string
}

func newMetisSystem(tb testing.TB, deltas, clientQueue int) *metisSystem {
	s := &metisSystem{m: startBenchMetis(tb, clientQueue), texts: make([]string, deltas)}
	for i := range s.texts {
		s.texts[i] = benchtest.DeltaText(i)
	}
	return s
}

func (s *metisSystem) connect(tb testing.TB, n int) []*websocket.Conn {
	tb.Helper()
	out := make([]*websocket.Conn, n)
	for i := range out {
		ws, _, err := benchtest.Dial(context.Background(), s.m.hc, s.m.url, s.m.sid, []string{string(event.TextDelta)}, "")
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = ws
	}
	// The ack follows the registration, so every client is live; let the
	// subscriber_registered meta-events settle before measuring.
	if err := s.m.em.Barrier(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return out
}

func (s *metisSystem) send(seq int) error { return s.m.emitDelta(s.texts[seq]) }

type floorSystem struct {
	f      *floorServer
	frames [][]byte
}

func newFloorSystem(tb testing.TB, deltas int) *floorSystem {
	s := &floorSystem{f: startFloor(nil), frames: benchDeltaFrames(deltas)}
	tb.Cleanup(s.f.Close)
	return s
}

func (s *floorSystem) connect(tb testing.TB, n int) []*websocket.Conn {
	tb.Helper()
	out := make([]*websocket.Conn, n)
	for i := range out {
		ws, _, err := websocket.Dial(context.Background(), s.f.URL(), nil)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = ws
	}
	if !s.f.waitClients(n, 10*time.Second) {
		tb.Fatalf("floor: %d of %d clients registered", s.f.Clients(), n)
	}
	return out
}

func (s *floorSystem) send(seq int) error { s.f.broadcast(s.frames[seq]); return nil }

func newSystem(tb testing.TB, name string, deltas, clientQueue int) benchSystem {
	if name == "metis" {
		return newMetisSystem(tb, deltas, clientQueue)
	}
	return newFloorSystem(tb, deltas)
}

// benchSystems is the order the two systems run in; set
// $METIS_STREAM_BENCH_FLOOR_FIRST to run the floor first (alternate it
// between repeated runs to cancel order effects).
func benchSystems() []string {
	if os.Getenv("METIS_STREAM_BENCH_FLOOR_FIRST") != "" {
		return []string{"floor", "metis"}
	}
	return []string{"metis", "floor"}
}

// ---------------------------------------------------------------------------
// latency

func BenchmarkLatency(b *testing.B) {
	benchtest.RaiseNoFile()
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			for _, name := range benchSystems() {
				b.Run(name, func(b *testing.B) { runLatency(b, name, n) })
			}
		})
	}
}

func runLatency(b *testing.B, name string, nClients int) {
	interval := time.Second / benchRate
	measured := int(benchLatDur / interval)
	total := benchWarm + measured
	var lat []float64 // µs, every client's measured deltas, every iteration
	var rates, cpuUs, allocB, gcs []float64
	for b.Loop() {
		sys := newSystem(b, name, total, 100000)
		conns := sys.connect(b, nClients)
		base := time.Now()
		rxs := benchtest.NewReaders(conns, base, total, true)
		emitAt := make([]int64, total)
		runtime.GC()
		ms0 := memStats()
		cpu0 := cpu.Time()
		if err := benchtest.EmitPaced(base, emitAt, 0, total, interval, sys.send); err != nil {
			b.Fatal(err)
		}
		rates = append(rates, float64(measured-1)/(float64(emitAt[total-1]-emitAt[benchWarm])/1e9))
		if failed, why := benchtest.WaitAll(rxs, 60*time.Second); failed > 0 {
			b.Fatalf("%s: %d of %d clients did not get every delta: %s", name, failed, nClients, why)
		}
		cpuUs = append(cpuUs, float64(cpu.Time()-cpu0)/float64(total)/1e3)
		ms1 := memStats()
		allocB = append(allocB, float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(total))
		gcs = append(gcs, float64(ms1.NumGC-ms0.NumGC))
		benchtest.CloseAll(rxs)
		lat = append(lat, benchtest.Latencies(rxs, emitAt, benchWarm, total)...)
	}
	slices.Sort(lat)
	b.ReportMetric(benchtest.Quantile(lat, 0.50), "p50_us")
	b.ReportMetric(benchtest.Quantile(lat, 0.99), "p99_us")
	b.ReportMetric(benchtest.Quantile(lat, 0.999), "p999_us")
	b.ReportMetric(benchtest.Median(rates), "deltas/s")
	b.ReportMetric(benchtest.Median(cpuUs), "cpu_us/delta")
	b.ReportMetric(benchtest.Median(allocB), "alloc_B/delta")
	b.ReportMetric(benchtest.Median(gcs), "GCs")
}

// ---------------------------------------------------------------------------
// fan-out

func BenchmarkFanout(b *testing.B) {
	benchtest.RaiseNoFile()
	const n = 100
	b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
		for _, name := range benchSystems() {
			b.Run(name, func(b *testing.B) { runFanout(b, name, n) })
		}
	})
}

func runFanout(b *testing.B, name string, nClients int) {
	var rates, emitMs, cpuNs, allocB, gcs []float64
	for b.Loop() {
		// A client queue larger than the run, so nobody is closed as slow.
		sys := newSystem(b, name, benchFanout, 5*benchFanout)
		conns := sys.connect(b, nClients)
		base := time.Now()
		rxs := benchtest.NewReaders(conns, base, benchFanout, false)
		runtime.GC()
		ms0 := memStats()
		cpu0 := cpu.Time()
		start := time.Now()
		for i := range benchFanout {
			if err := sys.send(i); err != nil {
				b.Fatal(err)
			}
		}
		emitted := time.Since(start)
		failed, why := benchtest.WaitAll(rxs, 120*time.Second)
		elapsed := time.Since(start)
		used := cpu.Time() - cpu0
		ms1 := memStats()
		if failed > 0 {
			b.Fatalf("%s: %d of %d clients did not get every delta (slow close?): %s", name, failed, nClients, why)
		}
		benchtest.CloseAll(rxs)
		rates = append(rates, float64(nClients*benchFanout)/elapsed.Seconds())
		emitMs = append(emitMs, float64(emitted)/1e6)
		cpuNs = append(cpuNs, float64(used)/float64(nClients*benchFanout))
		allocB = append(allocB, float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(nClients*benchFanout))
		gcs = append(gcs, float64(ms1.NumGC-ms0.NumGC))
	}
	b.ReportMetric(benchtest.Median(rates), "frames/s")
	b.ReportMetric(benchtest.Median(emitMs), "emit_ms")
	b.ReportMetric(benchtest.Median(cpuNs), "cpu_ns/frame")
	b.ReportMetric(benchtest.Median(allocB), "alloc_B/frame")
	b.ReportMetric(benchtest.Median(gcs), "GCs")
}

// ---------------------------------------------------------------------------
// idle connection memory

const (
	benchEnvChild = "METIS_STREAM_BENCH_CHILD" // "metis" or "floor"
	benchEnvURL   = "METIS_STREAM_BENCH_URL"
	benchEnvSID   = "METIS_STREAM_BENCH_SID"
	benchEnvN     = "METIS_STREAM_BENCH_N"
)

// The idle-memory benchmark re-executes this test binary as a client
// process; the hook runs before the testing framework does.
func init() {
	if os.Getenv(benchEnvChild) != "" {
		os.Exit(benchIdleChild())
	}
}

// benchIdleChild opens the idle connections, prints "ready", and holds
// them until its stdin closes.
func benchIdleChild() int {
	kind, url, sid := os.Getenv(benchEnvChild), os.Getenv(benchEnvURL), os.Getenv(benchEnvSID)
	n, err := strconv.Atoi(os.Getenv(benchEnvN))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	benchtest.RaiseNoFile()
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if kind == "sse" {
		return benchIdleSSE(ctx, hc, url, sid, n)
	}
	conns := make([]*websocket.Conn, 0, n)
	for range n {
		var ws *websocket.Conn
		if kind == "metis" {
			ws, _, err = benchtest.Dial(ctx, hc, url, sid, []string{string(event.TextDelta)}, "")
		} else {
			ws, _, err = websocket.Dial(ctx, url, nil)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		conns = append(conns, ws)
		go func() { // answer control frames; nothing else arrives
			for {
				if _, _, err := ws.Read(ctx); err != nil {
					return
				}
			}
		}()
	}
	benchtest.Tell("ready")
	benchtest.AwaitParent()
	for _, ws := range conns {
		ws.CloseNow()
	}
	return 0
}

func BenchmarkIdleConnMemory(b *testing.B) {
	benchtest.RaiseNoFile()
	for _, name := range benchSystems() {
		b.Run(name, func(b *testing.B) {
			if name == "metis" {
				m := startBenchMetis(b, 0)
				benchIdleMemory(b, "metis", m.url, m.sid, func() int { return m.srv.Hub.Clients(m.sid) },
					func() error { return m.em.Barrier(context.Background()) })
				return
			}
			f := startFloor(nil)
			defer f.Close()
			benchIdleMemory(b, "floor", f.URL(), "", f.Clients, func() error { return nil })
		})
	}
}

// serverMem is the server-side memory the benchmark counts.
func serverMem() (heap, stack uint64) {
	for range benchGCs {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.StackInuse
}

func benchIdleMemory(b *testing.B, kind, url, sid string, registered func() int, settle func() error) {
	// Warm up first: one-time allocations of the first connections
	// (pools, lazily built tables) must not count per connection.
	if n, err := strconv.Atoi(os.Getenv("METIS_STREAM_BENCH_GCS")); err == nil && n > 0 {
		benchGCs = n
	}
	g0 := runtime.NumGoroutine()
	if err := idleRound(kind, url, sid, 20, registered, settle, nil); err != nil {
		b.Fatal(err)
	}
	waitGoroutines(g0)
	var kib, heap, stack, gor []float64
	for b.Loop() {
		g0 := runtime.NumGoroutine()
		h0, s0 := serverMem()
		err := idleRound(kind, url, sid, benchIdle, registered, settle, func() {
			h1, s1 := serverMem()
			writeHeapProfile(kind)
			g1 := runtime.NumGoroutine()
			n := float64(benchIdle)
			heap = append(heap, (float64(h1)-float64(h0))/n/1024)
			stack = append(stack, (float64(s1)-float64(s0))/n/1024)
			kib = append(kib, (float64(h1+s1)-float64(h0+s0))/n/1024)
			gor = append(gor, float64(g1-g0)/n)
		})
		if err != nil {
			b.Fatal(err)
		}
		waitGoroutines(g0)
	}
	b.ReportMetric(benchtest.Median(kib), "KiB/conn")
	b.ReportMetric(benchtest.Median(heap), "heapKiB/conn")
	b.ReportMetric(benchtest.Median(stack), "stackKiB/conn")
	b.ReportMetric(benchtest.Median(gor), "goroutines/conn")
}

// idleRound runs a child holding n connections, calls measure (if not
// nil) once the server holds them all, then ends the child and waits
// until the server released them.
func idleRound(kind, url, sid string, n int, registered func() int, settle func() error, measure func()) error {
	child, err := benchtest.StartChild(benchEnvChild+"="+kind, benchEnvURL+"="+url, benchEnvSID+"="+sid, benchEnvN+"="+strconv.Itoa(n))
	if err != nil {
		return err
	}
	if err := child.Expect("ready"); err != nil {
		_ = child.Close()
		return err
	}
	if err := waitFor(func() bool { return registered() == n }); err != nil {
		return fmt.Errorf("%d of %d connections registered: %w", registered(), n, err)
	}
	if err := settle(); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // let every goroutine park
	if measure != nil {
		measure()
	}
	if err := child.Close(); err != nil {
		return err
	}
	if err := waitFor(func() bool { return registered() == 0 }); err != nil {
		return fmt.Errorf("%d connections still registered: %w", registered(), err)
	}
	return settle()
}

func waitFor(cond func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// waitGoroutines waits (bounded) until the goroutines of the last round
// have exited.
func waitGoroutines(n int) {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// writeHeapProfile writes the heap profile with the idle connections
// held to $METIS_STREAM_BENCH_HEAPPROF.<kind> if that variable is set
// (run with -test.memprofilerate=1 for an exact profile).
func writeHeapProfile(kind string) {
	path := os.Getenv("METIS_STREAM_BENCH_HEAPPROF")
	if path == "" {
		return
	}
	f, err := os.Create(path + "." + kind)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("heap").WriteTo(f, 0)
}

// ---------------------------------------------------------------------------
// helpers

// benchGCs is how many collections run before reading MemStats; each
// one also halves goroutine stacks using under a quarter of their size.
// $METIS_STREAM_BENCH_GCS overrides it.
var benchGCs = 2

func memStats() runtime.MemStats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

// ---------------------------------------------------------------------------
// a never-reading client at overflow

const (
	benchOverflowQueue   = 1000 // --client-queue (the default): readers stalled by load do not overflow
	benchOverflowReaders = 10
)

func BenchmarkOverflowClose(b *testing.B) {
	benchtest.RaiseNoFile()
	b.Run(fmt.Sprintf("clients=%d", benchOverflowReaders), func(b *testing.B) {
		var alone, wedged, ratios, closeMs []float64
		i := 0
		for b.Loop() {
			var p99 [2]float64
			for k := range 2 {
				withWedged := (k+i)%2 == 1
				lat, took := runOverflowLatency(b, withWedged)
				if withWedged {
					p99[1] = benchtest.Quantile(lat, 0.99)
					closeMs = append(closeMs, float64(took)/1e6)
				} else {
					p99[0] = benchtest.Quantile(lat, 0.99)
				}
			}
			alone = append(alone, p99[0])
			wedged = append(wedged, p99[1])
			ratios = append(ratios, p99[1]/p99[0])
			b.Logf("run %d: p99 alone %.0f µs, wedged %.0f µs (ratio %.2f), overflow to close %.1f ms",
				i, p99[0], p99[1], p99[1]/p99[0], closeMs[len(closeMs)-1])
			i++
		}
		b.ReportMetric(benchtest.Median(alone), "p99_us_alone")
		b.ReportMetric(benchtest.Median(wedged), "p99_us_wedged")
		b.ReportMetric(benchtest.Median(ratios), "p99_ratio")
		b.ReportMetric(benchtest.Median(closeMs), "overflow_to_close_ms")
	})
}

// runOverflowLatency is one latency run against metis with
// benchOverflowReaders reading clients, plus a never-reading one if
// wedged. It returns the readers' sorted latencies (µs) and, if wedged,
// the time from the never-reader's overflow to its release.
func runOverflowLatency(b *testing.B, wedged bool) (lat []float64, overflowToClose time.Duration) {
	interval := time.Second / benchRate
	measured := int(benchLatDur / interval)
	total := benchWarm + measured
	sys := newMetisSystem(b, total, benchOverflowQueue)
	var stuck *websocket.Conn
	if wedged {
		stuck = benchConnectNarrow(b, sys.m)
		defer stuck.CloseNow()
	}
	conns := sys.connect(b, benchOverflowReaders)
	base := time.Now()
	rxs := benchtest.NewReaders(conns, base, total, true)
	emitAt := make([]int64, total)
	if err := benchtest.EmitPaced(base, emitAt, 0, total, interval, sys.send); err != nil {
		b.Fatal(err)
	}
	if failed, why := benchtest.WaitAll(rxs, 60*time.Second); failed > 0 {
		b.Fatalf("%d of %d readers did not get every delta: %s", failed, len(rxs), why)
	}
	benchtest.CloseAll(rxs)
	lat = benchtest.Latencies(rxs, emitAt, benchWarm, total)
	if wedged {
		overflowToClose = benchOverflowToClose(b, sys.m)
	}
	return lat, overflowToClose
}

// benchConnectNarrow connects a client with a 2 KiB receive buffer and
// 536-byte segments,
// subscribed to text.delta, that will never read again.
func benchConnectNarrow(b *testing.B, m *benchMetis) *websocket.Conn {
	b.Helper()
	ctx := context.Background()
	u, err := benchtest.Attach(ctx, m.hc, m.url, m.sid)
	if err != nil {
		b.Fatal(err)
	}
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
			if serr == nil {
				// Without a small segment size loopback's 64 KiB one
				// defeats the small window.
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 536)
			}
		}); err != nil {
			return err
		}
		return serr
	}}
	tr := &http.Transport{DialContext: d.DialContext}
	b.Cleanup(tr.CloseIdleConnections)
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		b.Fatal(err)
	}
	sub := []byte(`{"type":"subscribe","filter":{"event_types":["text.delta"]},"snapshot":false,"since":null}`)
	if err := ws.Write(ctx, websocket.MessageText, sub); err != nil {
		b.Fatal(err)
	}
	if _, data, err := ws.Read(ctx); err != nil || !bytes.Contains(data, []byte(protocol.TypeSubscribeAck)) {
		b.Fatalf("want subscribe_ack, got %s (%v)", data, err)
	}
	return ws
}

// benchOverflowToClose waits for the one client_too_slow warning and the
// matching bus.subscriber_unregistered and returns the time between them.
func benchOverflowToClose(b *testing.B, m *benchMetis) time.Duration {
	b.Helper()
	type named struct {
		Subscription string `json:"subscription_name"`
		Reason       string `json:"reason"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		evs, err := m.srv.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{m.sid},
			Types: []event.Type{event.BusHandlerWarning, event.BusSubscriberUnregister}})
		if err != nil {
			b.Fatal(err)
		}
		var warned time.Time
		var who string
		for _, e := range evs {
			var p named
			if json.Unmarshal(e.Payload, &p) != nil {
				continue
			}
			switch {
			case e.Type == event.BusHandlerWarning && p.Reason == "client_too_slow":
				warned, who = e.TS, p.Subscription
			case e.Type == event.BusSubscriberUnregister && who != "" && p.Subscription == who:
				return e.TS.Sub(warned)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal("the never-reading client was not closed as too slow")
	return 0
}
