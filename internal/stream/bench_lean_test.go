//go:build unix

package stream_test

// BenchmarkFlatOut measures the CPU per delta of one client receiving a
// long answer as fast as it is produced, end to end, metis against the
// floor in one run (the floor is in floor_test.go, the client code the
// benchmarks share in internal/benchtest):
//
//	BenchmarkFlatOut/clients=1/{metis-turn,metis-emit,floor}
//	    cpu_ns/delta  this process's CPU time per text.delta the client
//	                  read (server, client and, for metis-turn, the fake
//	                  provider all live in this process)
//	    deltas/s      the rate the client read them at
//	    alloc_B/delta bytes allocated per delta
//
//   - metis-turn: a whole turn on anthropic:claude-sonnet-4-6 whose
//     provider is an httptest server answering with a recorded-shape
//     stream of benchFlatDeltas text deltas: the anthropic adapter (the
//     SDK's request and stream reader, the adapter's decode and
//     translation), the agent loop, the bus (ids, encoding, outbox), the
//     hub, the client's queue, the WebSocket writer, the client's read.
//     The turn's catalog events (turn.started ... turn.completed, each
//     committed to the store) are part of it.
//   - metis-emit: the same deltas emitted straight into the session's bus
//     emitter (the adapter's emit, as BenchmarkLatency does), flat out:
//     the live path without the provider.
//   - floor: the same frames, pre-encoded, written from memory by the
//     floor's writer, flat out.
//
//	go test -run '^$' -bench FlatOut -benchtime 3x ./internal/stream/

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/benchtest/cpu"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/store"
)

const benchFlatDeltas = 4000 // text deltas of the answer

func BenchmarkFlatOut(b *testing.B) {
	b.Run("clients=1", func(b *testing.B) {
		names := []string{"metis-turn", "metis-emit", "floor"}
		if os.Getenv("METIS_STREAM_BENCH_FLOOR_FIRST") != "" {
			names = []string{"floor", "metis-emit", "metis-turn"}
		}
		for _, name := range names {
			b.Run(name, func(b *testing.B) { runFlatOut(b, name) })
		}
	})
}

func runFlatOut(b *testing.B, name string) {
	var cpuNs, rates, allocB []float64
	for b.Loop() {
		var (
			conn  func() []*benchtest.Reader
			start func() error
		)
		switch name {
		case "metis-turn":
			m := startFlatMetis(b)
			conn = func() []*benchtest.Reader { return m.connect(b) }
			start = m.turn
		case "metis-emit":
			sys := newMetisSystem(b, benchFlatDeltas, 5*benchFlatDeltas)
			conn = func() []*benchtest.Reader { return rxFor(sys.connect(b, 1)) }
			start = func() error {
				for i := range benchFlatDeltas {
					if err := sys.send(i); err != nil {
						return err
					}
				}
				return nil
			}
		default:
			sys := newFloorSystem(b, benchFlatDeltas)
			conn = func() []*benchtest.Reader { return rxFor(sys.connect(b, 1)) }
			start = func() error {
				for i := range benchFlatDeltas {
					_ = sys.send(i)
				}
				return nil
			}
		}
		rxs := conn()
		runtime.GC()
		ms0 := memStats()
		cpu0 := cpu.Time()
		t0 := time.Now()
		errc := make(chan error, 1)
		go func() { errc <- start() }()
		failed, why := benchtest.WaitAll(rxs, 120*time.Second)
		elapsed := time.Since(t0)
		cpu := cpu.Time() - cpu0
		ms1 := memStats()
		if err := <-errc; err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		benchtest.CloseAll(rxs)
		if failed > 0 {
			b.Fatalf("%s: the client did not get every delta: %s", name, why)
		}
		cpuNs = append(cpuNs, float64(cpu)/benchFlatDeltas)
		rates = append(rates, benchFlatDeltas/elapsed.Seconds())
		allocB = append(allocB, float64(ms1.TotalAlloc-ms0.TotalAlloc)/benchFlatDeltas)
	}
	b.ReportMetric(benchtest.Median(cpuNs), "cpu_ns/delta")
	b.ReportMetric(benchtest.Median(rates), "deltas/s")
	b.ReportMetric(benchtest.Median(allocB), "alloc_B/delta")
}

// rxFor starts one reader per connection, each waiting for every delta.
func rxFor(conns []*websocket.Conn) []*benchtest.Reader {
	return benchtest.NewReaders(conns, time.Now(), benchFlatDeltas, false)
}

// flatMetis is a metis server whose default model is Anthropic's, served
// by a fake provider answering every call with the long answer.
type flatMetis struct {
	*benchMetis
}

func startFlatMetis(b *testing.B) *flatMetis {
	b.Helper()
	body := []byte(flatAnthropicStream(benchFlatDeltas))
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("request-id", "req_bench")
		_, _ = w.Write(body)
	}))
	b.Cleanup(provider.Close)

	return &flatMetis{startBenchMetisWith(b, func(cfg *config.Config) {
		cfg.ClientQueue = 5 * benchFlatDeltas // nobody is closed as slow
		cfg.Providers = config.Providers{"anthropic": {APIKey: "sk-ant-bench", BaseURL: provider.URL}}
		cfg.DefaultModel = "anthropic:claude-sonnet-4-6"
	})}
}

func (m *flatMetis) connect(b *testing.B) []*benchtest.Reader {
	b.Helper()
	ws, _, err := benchtest.Dial(context.Background(), m.hc, m.url, m.sid, []string{"text.delta"}, "")
	if err != nil {
		b.Fatal(err)
	}
	if err := m.em.Barrier(context.Background()); err != nil {
		b.Fatal(err)
	}
	return rxFor([]*websocket.Conn{ws})
}

// turn runs one turn; the client's reader tells when its deltas arrived.
func (m *flatMetis) turn() error {
	out, err := m.srv.Sessions.RunTurn(context.Background(), m.sid, "write the long answer", "")
	if err != nil {
		return err
	}
	if out.Status != store.TurnCompleted {
		return fmt.Errorf("turn ended %s: %s", out.Status, out.Reason)
	}
	return nil
}

// flatAnthropicStream is an Anthropic Messages stream of one text block
// of n text deltas whose texts are benchtest.DeltaText(0..n-1), so the
// benchmark's Reader counts them.
func flatAnthropicStream(n int) string {
	var s strings.Builder
	s.WriteString("event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_01FlatOutBench000000000","type":"message","role":"assistant",` +
		`"model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":2731,"output_tokens":3}}}` + "\n\n")
	s.WriteString("event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n")
	for i := range n {
		q, _ := json.Marshal(benchtest.DeltaText(i))
		fmt.Fprintf(&s, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%s}}\n\n", q)
		if i%500 == 499 {
			s.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
		}
	}
	s.WriteString("event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n")
	fmt.Fprintf(&s, "event: message_delta\n"+`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`+"\n\n", 3*n)
	s.WriteString("event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n")
	return s.String()
}

// BenchmarkIdleConnRSS is BenchmarkIdleConnMemory measured the way the
// operating system sees it: the growth of this process's resident set
// (VmRSS, and RssAnon, its private anonymous part) per idle subscribed
// connection, the clients living in a child process. Before each round
// the heap is collected and its free pages returned to the system
// (debug.FreeOSMemory), so the round starts from what is in use; while
// the connections are held nothing is forced, so the figure includes the
// collector's headroom, as a running server's would.
//
//	BenchmarkIdleConnRSS/{metis,floor}   rssKiB/conn anonKiB/conn
func BenchmarkIdleConnRSS(b *testing.B) {
	benchtest.RaiseNoFile()
	for _, name := range benchSystems() {
		b.Run(name, func(b *testing.B) {
			if name == "metis" {
				m := startBenchMetis(b, 0)
				benchIdleRSS(b, "metis", m.url, m.sid, func() int { return m.srv.Hub.Clients(m.sid) },
					func() error { return m.em.Barrier(context.Background()) })
				return
			}
			f := startFloor(nil)
			defer f.Close()
			benchIdleRSS(b, "floor", f.URL(), "", f.Clients, func() error { return nil })
		})
	}
	b.Run("metis-sse", func(b *testing.B) {
		m := startBenchMetis(b, 0)
		benchIdleRSS(b, "sse", m.url, m.sid, func() int { return m.srv.Hub.Clients(m.sid) },
			func() error { return m.em.Barrier(context.Background()) })
	})
}

func benchIdleRSS(b *testing.B, kind, url, sid string, registered func() int, settle func() error) {
	g0 := runtime.NumGoroutine()
	if err := idleRound(kind, url, sid, 20, registered, settle, nil); err != nil { // warm-up
		b.Fatal(err)
	}
	waitGoroutines(g0)
	var rss, anon []float64
	for b.Loop() {
		g0 := runtime.NumGoroutine()
		debug.FreeOSMemory()
		r0, a0, err := residentKiB()
		if err != nil {
			b.Fatal(err)
		}
		err = idleRound(kind, url, sid, benchIdle, registered, settle, func() {
			r1, a1, err := residentKiB()
			if err != nil {
				b.Fatal(err)
			}
			rss = append(rss, float64(r1-r0)/benchIdle)
			anon = append(anon, float64(a1-a0)/benchIdle)
		})
		if err != nil {
			b.Fatal(err)
		}
		waitGoroutines(g0)
	}
	b.ReportMetric(benchtest.Median(rss), "rssKiB/conn")
	b.ReportMetric(benchtest.Median(anon), "anonKiB/conn")
}

// residentKiB reads VmRSS and RssAnon of this process from
// /proc/self/status (Linux).
func residentKiB() (rss, anon int64, err error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "RssAnon") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/self/status %s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = n
		} else {
			anon = n
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("/proc/self/status: no VmRSS")
	}
	return rss, anon, nil
}
