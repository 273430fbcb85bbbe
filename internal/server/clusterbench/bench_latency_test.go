package clusterbench_test

import (
	"context"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/benchtest/cpu"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
)

// BenchmarkClusterLatency: text.delta latency from the model adapter's
// emit on the tree's owner (bus.Emitter.Emit: id, encode once, outbox;
// in cluster mode also the publish to the log) to the read of a
// WebSocket client of another node (the log, that node's feed, its bus
// relay, hub, client queue, writer, socket), against a client of
// single-node metis, in the same run. 1,000 deltas/s paced by sleeping
// to a schedule, 300 warm-up deltas, then 2.5 s measured, per system
// per iteration; the systems take turns, their order alternating per
// iteration. Clients and servers share this process.
//
//	{single,r1,r3}_p50_us, _p99_us   latency percentiles (median over
//	                                 iterations)
//	{r1,r3}_p50_ratio, _p99_ratio    over single's of the same
//	                                 iteration (median)
//	{single,r1,r3}_cpu_us/delta      this process's CPU time per delta:
//	                                 every node and NATS server included
//
//	go test -run '^$' -bench ClusterLatency -benchtime 1x -count 3 ./internal/server/clusterbench/
func BenchmarkClusterLatency(b *testing.B) {
	systems := []*system{
		startSystem(b, sysSingle, 1, nil),
		startSystem(b, sysR1, 2, nil),
		startSystem(b, sysR3, 2, nil),
	}
	runs := make([]*latencyRun, len(systems))
	for i, s := range systems {
		runs[i] = newLatencyRun(b, s)
	}
	p50, p99, cpu := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	ratio50, ratio99 := map[string][]float64{}, map[string][]float64{}
	iter := 0
	for b.Loop() {
		got := map[string][2]float64{}
		for k := range runs {
			r := runs[(k+iter)%len(runs)]
			lat, c := r.run(b)
			q := [2]float64{benchtest.Quantile(lat, 0.50), benchtest.Quantile(lat, 0.99)}
			got[r.sys.name] = q
			p50[r.sys.name] = append(p50[r.sys.name], q[0])
			p99[r.sys.name] = append(p99[r.sys.name], q[1])
			cpu[r.sys.name] = append(cpu[r.sys.name], c)
		}
		for _, name := range []string{sysR1, sysR3} {
			ratio50[name] = append(ratio50[name], got[name][0]/got[sysSingle][0])
			ratio99[name] = append(ratio99[name], got[name][1]/got[sysSingle][1])
		}
		b.Logf("iteration %d: p50/p99 µs single %.0f/%.0f, r1 %.0f/%.0f, r3 %.0f/%.0f", iter,
			got[sysSingle][0], got[sysSingle][1], got[sysR1][0], got[sysR1][1], got[sysR3][0], got[sysR3][1])
		iter++
	}
	for _, s := range systems {
		b.ReportMetric(benchtest.Median(p50[s.name]), s.name+"_p50_us")
		b.ReportMetric(benchtest.Median(p99[s.name]), s.name+"_p99_us")
		b.ReportMetric(benchtest.Median(cpu[s.name]), s.name+"_cpu_us/delta")
	}
	for _, name := range []string{sysR1, sysR3} {
		b.ReportMetric(benchtest.Median(ratio50[name]), name+"_p50_ratio")
		b.ReportMetric(benchtest.Median(ratio99[name]), name+"_p99_ratio")
	}
}

const (
	latencyRate = 1000                    // deltas/s
	latencyDur  = 2500 * time.Millisecond // measured part of a run
	latencyWarm = 300                     // warm-up deltas, not measured
)

// latencyRun is one system's latency set-up: a session owned by
// nodes[0], whose client is on the last node (nodes[0] itself for
// single-node metis).
type latencyRun struct {
	sys    *system
	sid    string
	em     *bus.Emitter
	client int
	texts  []string
}

func newLatencyRun(b *testing.B, s *system) *latencyRun {
	sid, em := s.session(b, "")
	total := latencyWarm + int(latencyDur/(time.Second/latencyRate))
	return &latencyRun{sys: s, sid: sid, em: em, client: len(s.nodes) - 1, texts: benchtest.DeltaTexts(total)}
}

// run connects one client, emits the paced deltas and returns the
// sorted latencies (µs) of the measured ones and the CPU per delta (µs).
func (r *latencyRun) run(b *testing.B) ([]float64, float64) {
	ctx := context.Background()
	ws, _, err := dial(ctx, r.sys.nodes[r.client], r.sid, []string{string(event.TextDelta)}, "")
	if err != nil {
		b.Fatalf("%s: %v", r.sys.name, err)
	}
	settle(b, r.em)
	total := len(r.texts)
	base := time.Now()
	rd := []*benchtest.Reader{benchtest.NewReader(ws, base, total, true)}
	emitAt := make([]int64, total)
	cpu0 := cpu.Time()
	send := func(i int) error { return emitDelta(r.em, r.texts[i]) }
	if err := benchtest.EmitPaced(base, emitAt, 0, total, time.Second/latencyRate, send); err != nil {
		b.Fatal(err)
	}
	if err := benchtest.WaitGot(rd, int64(total), time.Minute); err != nil {
		b.Fatalf("%s: %v", r.sys.name, err)
	}
	cpu := float64(cpu.Time()-cpu0) / float64(total) / 1e3
	benchtest.CloseAll(rd)
	return benchtest.Latencies(rd, emitAt, latencyWarm, total), cpu
}
