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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

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

// benchTextDelta is the agent's text.delta payload (internal/agent).
type benchTextDelta struct {
	MessageID string `json:"message_id"`
	Index     int    `json:"content_block_index"`
	Text      string `json:"text"`
}

// benchText is delta seq's text: a sequence number the clients parse,
// then a few words, the size of a typical model delta.
func benchText(seq int) string { return fmt.Sprintf("#%08d the quick", seq) }

var benchTextKey = []byte(`"text":"#`)

// benchSeq returns the sequence number of a delta frame, or -1.
func benchSeq(frame []byte) int {
	i := bytes.Index(frame, benchTextKey)
	if i < 0 || len(frame) < i+len(benchTextKey)+8 {
		return -1
	}
	n := 0
	for _, c := range frame[i+len(benchTextKey) : i+len(benchTextKey)+8] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// benchDeltaFrames pre-encodes n text.delta event frames exactly as metis
// frames them (a sealed event.Event wrapped by protocol.EventFrame).
func benchDeltaFrames(n int) [][]byte {
	seq, _ := event.NewSequencer("", nil)
	sid := event.NewID("sess_")
	out := make([][]byte, n)
	for i := range out {
		id, ts := seq.Next()
		payload, err := json.Marshal(benchTextDelta{MessageID: benchMsgID, Text: benchText(i)})
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
		Payload: benchTextDelta{MessageID: benchMsgID, Text: text}})
	return err
}

// benchAttach performs GET /sessions/{id} and returns the ws_url.
func benchAttach(ctx context.Context, hc *http.Client, base, sid string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sessions/"+sid, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /sessions/%s: %s", sid, resp.Status)
	}
	var info struct {
		WSURL string `json:"ws_url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return "", err
	}
	return info.WSURL, nil
}

// benchConnect attaches to a metis session, subscribes with an explicit
// type filter (and since, if not empty) and reads the subscribe_ack.
func benchConnect(ctx context.Context, hc *http.Client, base, sid, typ, since string) (*websocket.Conn, protocol.SubscribeAck, error) {
	var ack protocol.SubscribeAck
	u, err := benchAttach(ctx, hc, base, sid)
	if err != nil {
		return nil, ack, err
	}
	ws, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		return nil, ack, err
	}
	sub := map[string]any{"type": "subscribe", "filter": map[string]any{"event_types": []string{typ}}, "snapshot": false, "since": nil}
	if since != "" {
		sub["since"] = since
	}
	b, _ := json.Marshal(sub)
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		ws.CloseNow()
		return nil, ack, err
	}
	_, data, err := ws.Read(ctx)
	if err != nil {
		ws.CloseNow()
		return nil, ack, err
	}
	if err := json.Unmarshal(data, &ack); err != nil || ack.Type != protocol.TypeSubscribeAck {
		ws.CloseNow()
		return nil, ack, fmt.Errorf("want subscribe_ack, got %s", data)
	}
	return ws, ack, nil
}

// ---------------------------------------------------------------------------
// the shared client

type benchSample struct {
	seq int32
	at  int64 // ns since base
}

// benchRx reads one connection in its own goroutine, recording the
// receive time of every delta frame, until the connection ends.
type benchRx struct {
	ws      *websocket.Conn
	base    time.Time
	record  bool
	want    int64
	got     atomic.Int64
	samples []benchSample
	done    chan struct{} // closed when want frames arrived
	exited  chan struct{} // closed when the reader stops
	err     error
}

func newBenchRx(ws *websocket.Conn, base time.Time, want int, record bool) *benchRx {
	r := &benchRx{ws: ws, base: base, record: record, want: int64(want), done: make(chan struct{}), exited: make(chan struct{})}
	if record {
		r.samples = make([]benchSample, 0, want)
	}
	go r.run()
	return r
}

func (r *benchRx) run() {
	defer close(r.exited)
	buf := make([]byte, 4096)
	for {
		_, rd, err := r.ws.Reader(context.Background())
		if err != nil {
			r.err = err
			return
		}
		n := 0
		for {
			if n == len(buf) {
				buf = append(buf, make([]byte, len(buf))...)
			}
			m, err := rd.Read(buf[n:])
			n += m
			if err == io.EOF {
				break
			}
			if err != nil {
				r.err = err
				return
			}
		}
		at := int64(time.Since(r.base))
		seq := benchSeq(buf[:n])
		if seq < 0 {
			continue
		}
		if r.record {
			r.samples = append(r.samples, benchSample{int32(seq), at})
		}
		if r.got.Add(1) == r.want {
			close(r.done)
		}
	}
}

// waitAll waits until every client got its frames; it returns the number
// of clients that ended early (with their close status) or timed out.
func waitAll(rxs []*benchRx, timeout time.Duration) (failed int, why string) {
	deadline := time.After(timeout)
	for _, r := range rxs {
		select {
		case <-r.done:
		case <-r.exited:
			failed++
			why = fmt.Sprintf("client ended after %d frames: close status %d: %v", r.got.Load(), websocket.CloseStatus(r.err), r.err)
		case <-deadline:
			return len(rxs), "timed out"
		}
	}
	return failed, why
}

func closeAll(rxs []*benchRx) {
	for _, r := range rxs {
		r.ws.CloseNow()
	}
	for _, r := range rxs {
		<-r.exited
	}
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
		s.texts[i] = benchText(i)
	}
	return s
}

func (s *metisSystem) connect(tb testing.TB, n int) []*websocket.Conn {
	tb.Helper()
	out := make([]*websocket.Conn, n)
	for i := range out {
		ws, _, err := benchConnect(context.Background(), s.m.hc, s.m.url, s.m.sid, string(event.TextDelta), "")
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
	raiseNoFile()
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
	var rates, cpu, allocB, gcs []float64
	for b.Loop() {
		sys := newSystem(b, name, total, 100000)
		conns := sys.connect(b, nClients)
		base := time.Now()
		rxs := make([]*benchRx, nClients)
		for i, ws := range conns {
			rxs[i] = newBenchRx(ws, base, total, true)
		}
		emitAt := make([]int64, total)
		runtime.GC()
		ms0 := memStats()
		cpu0 := cpuTime()
		start := time.Now()
		for i := range total {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
			emitAt[i] = int64(time.Since(base))
			if err := sys.send(i); err != nil {
				b.Fatal(err)
			}
		}
		rates = append(rates, float64(measured-1)/(float64(emitAt[total-1]-emitAt[benchWarm])/1e9))
		if failed, why := waitAll(rxs, 60*time.Second); failed > 0 {
			b.Fatalf("%s: %d of %d clients did not get every delta: %s", name, failed, nClients, why)
		}
		cpu = append(cpu, float64(cpuTime()-cpu0)/float64(total)/1e3)
		ms1 := memStats()
		allocB = append(allocB, float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(total))
		gcs = append(gcs, float64(ms1.NumGC-ms0.NumGC))
		closeAll(rxs)
		for _, r := range rxs {
			for _, s := range r.samples {
				if int(s.seq) >= benchWarm {
					lat = append(lat, float64(s.at-emitAt[s.seq])/1e3)
				}
			}
		}
	}
	slices.Sort(lat)
	b.ReportMetric(quantile(lat, 0.50), "p50_us")
	b.ReportMetric(quantile(lat, 0.99), "p99_us")
	b.ReportMetric(quantile(lat, 0.999), "p999_us")
	b.ReportMetric(median(rates), "deltas/s")
	b.ReportMetric(median(cpu), "cpu_us/delta")
	b.ReportMetric(median(allocB), "alloc_B/delta")
	b.ReportMetric(median(gcs), "GCs")
}

// ---------------------------------------------------------------------------
// fan-out

func BenchmarkFanout(b *testing.B) {
	raiseNoFile()
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
		rxs := make([]*benchRx, nClients)
		for i, ws := range conns {
			rxs[i] = newBenchRx(ws, base, benchFanout, false)
		}
		runtime.GC()
		ms0 := memStats()
		cpu0 := cpuTime()
		start := time.Now()
		for i := range benchFanout {
			if err := sys.send(i); err != nil {
				b.Fatal(err)
			}
		}
		emitted := time.Since(start)
		failed, why := waitAll(rxs, 120*time.Second)
		elapsed := time.Since(start)
		cpu := cpuTime() - cpu0
		ms1 := memStats()
		if failed > 0 {
			b.Fatalf("%s: %d of %d clients did not get every delta (slow close?): %s", name, failed, nClients, why)
		}
		closeAll(rxs)
		rates = append(rates, float64(nClients*benchFanout)/elapsed.Seconds())
		emitMs = append(emitMs, float64(emitted)/1e6)
		cpuNs = append(cpuNs, float64(cpu)/float64(nClients*benchFanout))
		allocB = append(allocB, float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(nClients*benchFanout))
		gcs = append(gcs, float64(ms1.NumGC-ms0.NumGC))
	}
	b.ReportMetric(median(rates), "frames/s")
	b.ReportMetric(median(emitMs), "emit_ms")
	b.ReportMetric(median(cpuNs), "cpu_ns/frame")
	b.ReportMetric(median(allocB), "alloc_B/frame")
	b.ReportMetric(median(gcs), "GCs")
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
	raiseNoFile()
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if kind == "sse" {
		return benchIdleSSE(ctx, hc, url, sid, n)
	}
	conns := make([]*websocket.Conn, 0, n)
	for range n {
		var ws *websocket.Conn
		if kind == "metis" {
			ws, _, err = benchConnect(ctx, hc, url, sid, string(event.TextDelta), "")
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
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, ws := range conns {
		ws.CloseNow()
	}
	return 0
}

func BenchmarkIdleConnMemory(b *testing.B) {
	raiseNoFile()
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
	b.ReportMetric(median(kib), "KiB/conn")
	b.ReportMetric(median(heap), "heapKiB/conn")
	b.ReportMetric(median(stack), "stackKiB/conn")
	b.ReportMetric(median(gor), "goroutines/conn")
}

// idleRound runs a child holding n connections, calls measure (if not
// nil) once the server holds them all, then ends the child and waits
// until the server released them.
func idleRound(kind, url, sid string, n int, registered func() int, settle func() error, measure func()) error {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchEnvChild+"="+kind, benchEnvURL+"="+url, benchEnvSID+"="+sid, benchEnvN+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		stdin.Close()
		_ = cmd.Wait()
		return fmt.Errorf("child did not get ready: %q %v", line, err)
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
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("child: %w", err)
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

var noFileOnce sync.Once

// raiseNoFile lifts the soft file-descriptor limit to the hard one.
func raiseNoFile() {
	noFileOnce.Do(func() {
		var l syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
			l.Cur = l.Max
			_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
		}
	})
}

// cpuTime is the CPU time this process used so far (every thread, user
// and system). Unlike wall time it barely moves with the load of other
// processes on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func memStats() runtime.MemStats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

// quantile of sorted xs (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ---------------------------------------------------------------------------
// a never-reading client at overflow

const (
	benchOverflowQueue   = 1000 // --client-queue (the default): readers stalled by load do not overflow
	benchOverflowReaders = 10
)

func BenchmarkOverflowClose(b *testing.B) {
	raiseNoFile()
	b.Run(fmt.Sprintf("clients=%d", benchOverflowReaders), func(b *testing.B) {
		var alone, wedged, ratios, closeMs []float64
		i := 0
		for b.Loop() {
			var p99 [2]float64
			for k := range 2 {
				withWedged := (k+i)%2 == 1
				lat, took := runOverflowLatency(b, withWedged)
				if withWedged {
					p99[1] = quantile(lat, 0.99)
					closeMs = append(closeMs, float64(took)/1e6)
				} else {
					p99[0] = quantile(lat, 0.99)
				}
			}
			alone = append(alone, p99[0])
			wedged = append(wedged, p99[1])
			ratios = append(ratios, p99[1]/p99[0])
			b.Logf("run %d: p99 alone %.0f µs, wedged %.0f µs (ratio %.2f), overflow to close %.1f ms",
				i, p99[0], p99[1], p99[1]/p99[0], closeMs[len(closeMs)-1])
			i++
		}
		b.ReportMetric(median(alone), "p99_us_alone")
		b.ReportMetric(median(wedged), "p99_us_wedged")
		b.ReportMetric(median(ratios), "p99_ratio")
		b.ReportMetric(median(closeMs), "overflow_to_close_ms")
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
	rxs := make([]*benchRx, len(conns))
	for i, ws := range conns {
		rxs[i] = newBenchRx(ws, base, total, true)
	}
	emitAt := make([]int64, total)
	start := time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		emitAt[i] = int64(time.Since(base))
		if err := sys.send(i); err != nil {
			b.Fatal(err)
		}
	}
	if failed, why := waitAll(rxs, 60*time.Second); failed > 0 {
		b.Fatalf("%d of %d readers did not get every delta: %s", failed, len(rxs), why)
	}
	closeAll(rxs)
	for _, r := range rxs {
		for _, s := range r.samples {
			if int(s.seq) >= benchWarm {
				lat = append(lat, float64(s.at-emitAt[s.seq])/1e3)
			}
		}
	}
	slices.Sort(lat)
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
	u, err := benchAttach(ctx, m.hc, m.url, m.sid)
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
