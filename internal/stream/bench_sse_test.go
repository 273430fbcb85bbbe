//go:build unix

package stream_test

// BenchmarkFanoutSSE: deltas emitted as fast as the emitter takes them
// reach 100 SSE clients (GET /sessions/{id}/events) of a real server.
// The clients run in a child process (this test binary re-executed), so
// this process is the server alone: its CPU time (getrusage, every
// thread) from the first emit to the last frame read, divided by the
// frames delivered, is the server's CPU per delivered SSE frame
// (cpu_ns/frame). frames/s counts the frames all clients read together
// per second of that span.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/benchtest/cpu"
)

const (
	benchEnvSSEChild = "METIS_STREAM_BENCH_SSE_CHILD" // "url sid clients deltas"
	benchSSEClients  = 100
	benchSSEDeltas   = 2000
)

func init() {
	if v := os.Getenv(benchEnvSSEChild); v != "" {
		os.Exit(benchSSEChild(v))
	}
}

var (
	sseAckPrefix   = []byte(`data: {"type":"subscribe_ack"`)
	sseEventPrefix = []byte(`data: {"type":"event"`)
)

// benchSSEChild opens the SSE clients, prints "ready" once every one has
// its subscribe_ack, prints "done" once every one has read every delta,
// and ends when its stdin closes.
func benchSSEChild(args string) int {
	f := strings.Fields(args)
	if len(f) != 4 {
		fmt.Fprintln(os.Stderr, "sse child: want url, sid, clients, deltas")
		return 2
	}
	url, sid := f[0], f[1]
	n, err1 := strconv.Atoi(f[2])
	deltas, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "sse child: bad numbers", args)
		return 2
	}
	benchtest.RaiseNoFile()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: n}}
	var ready, done sync.WaitGroup
	var mu sync.Mutex
	var failure error
	fail := func(err error) {
		mu.Lock()
		if failure == nil {
			failure = err
		}
		mu.Unlock()
	}
	var bodies []io.Closer
	for range n {
		body, err := openDeltaSSE(ctx, hc, url, sid)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sse child:", err)
			return 1
		}
		bodies = append(bodies, body)
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			r := bufio.NewReaderSize(body, 64<<10)
			acked := false
			for got := 0; got < deltas; {
				line, err := r.ReadSlice('\n')
				if err != nil {
					if !acked {
						ready.Done()
					}
					fail(fmt.Errorf("after %d deltas: %w", got, err))
					return
				}
				switch {
				case bytes.HasPrefix(line, sseEventPrefix):
					got++
				case !acked && bytes.HasPrefix(line, sseAckPrefix):
					acked = true
					ready.Done()
				}
			}
		}()
	}
	ready.Wait()
	benchtest.Tell("ready")
	done.Wait()
	if failure != nil {
		fmt.Fprintln(os.Stderr, "sse child:", failure)
		return 1
	}
	benchtest.Tell("done")
	benchtest.AwaitParent()
	for _, b := range bodies {
		b.Close()
	}
	return 0
}

func BenchmarkFanoutSSE(b *testing.B) {
	benchtest.RaiseNoFile()
	// A client queue larger than the run, so nobody is closed as slow.
	m := startBenchMetis(b, 5*benchSSEDeltas)
	texts := make([]string, benchSSEDeltas)
	for i := range texts {
		texts[i] = benchtest.DeltaText(i)
	}
	var rates, cpuNs []float64
	for b.Loop() {
		child, err := benchtest.StartChild(fmt.Sprintf("%s=%s %s %d %d", benchEnvSSEChild, m.url, m.sid, benchSSEClients, benchSSEDeltas))
		if err != nil {
			b.Fatal(err)
		}
		if err := child.Expect("ready"); err != nil {
			_ = child.Close()
			b.Fatalf("sse child: %v", err)
		}
		runtime.GC()
		cpu0 := cpu.Time()
		start := time.Now()
		for i := range benchSSEDeltas {
			if err := m.emitDelta(texts[i]); err != nil {
				b.Fatal(err)
			}
		}
		err = child.Expect("done")
		elapsed := time.Since(start)
		cpu := cpu.Time() - cpu0
		if cerr := child.Close(); err != nil || cerr != nil {
			b.Fatalf("sse child: %v %v", err, cerr)
		}
		if err := waitFor(func() bool { return m.srv.Hub.Clients(m.sid) == 0 }); err != nil {
			b.Fatal(err)
		}
		frames := float64(benchSSEClients * benchSSEDeltas)
		rates = append(rates, frames/elapsed.Seconds())
		cpuNs = append(cpuNs, float64(cpu)/frames)
	}
	b.ReportMetric(benchtest.Median(rates), "frames/s")
	b.ReportMetric(benchtest.Median(cpuNs), "cpu_ns/frame")
}

// benchIdleSSE is benchIdleChild for SSE clients: it opens n streams
// of text.delta, prints "ready" once each has its subscribe_ack, and
// holds them until its stdin closes.
func benchIdleSSE(ctx context.Context, hc *http.Client, url, sid string, n int) int {
	bodies := make([]io.Closer, 0, n)
	defer func() {
		for _, b := range bodies {
			b.Close()
		}
	}()
	for range n {
		body, err := openDeltaSSE(ctx, hc, url, sid)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		bodies = append(bodies, body)
		r := bufio.NewReader(body)
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				fmt.Fprintln(os.Stderr, "child: no subscribe_ack:", err)
				return 1
			}
			if bytes.HasPrefix(line, sseAckPrefix) {
				break
			}
		}
		go func() { _, _ = io.Copy(io.Discard, r) }()
	}
	benchtest.Tell("ready")
	benchtest.AwaitParent()
	return 0
}

// openDeltaSSE opens an SSE stream of session sid's text deltas (GET
// /sessions/{id}/events?types=text.delta) and returns its body.
func openDeltaSSE(ctx context.Context, hc *http.Client, url, sid string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/sessions/"+sid+"/events?types=text.delta", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	return resp.Body, nil
}
