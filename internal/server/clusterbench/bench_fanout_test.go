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

// BenchmarkClusterFanout: 300 WebSocket clients of one session, spread
// over three metis nodes (100 each; the tree's owner is one of them)
// on a three-server NATS cluster with replicas 3, against 300 clients
// of one single-node server, in the same run. Each iteration, for each
// system in turn (order alternating):
//
//   - flat out: 2,000 text.delta emitted by the owner's adapter as fast
//     as the emitter takes them; frames/s is every client's frames over
//     the time from the first emit to the last client's last read;
//   - paced: 100 deltas/s (30,000 frames/s over the 300 clients), 50
//     warm-up deltas, then 2 s measured: the latency from the emit to
//     each client's read, every client pooled.
//
// It reports:
//
//	{single,r3}_frames/s                  flat out
//	{single,r3}_flat_p99_ms               latency in the flat-out phase
//	                                      (queueing: about the time to
//	                                      drain the backlog)
//	{single,r3}_p50_us, _p99_us           paced
//	r3_remote_p99_us                      paced, clients of the two
//	                                      nodes that do not own the tree
//	r3_frames_ratio, r3_p99_ratio         over single's of the same
//	                                      iteration (median)
//	{single,r3}_cpu_us/frame              this process's CPU per frame
//	                                      delivered, flat out
//
//	go test -run '^$' -bench ClusterFanout -benchtime 1x -count 3 ./internal/server/clusterbench/
func BenchmarkClusterFanout(b *testing.B) {
	runs := []*fanoutRun{
		newFanoutRun(b, startSystem(b, sysSingle, 1, nil)),
		newFanoutRun(b, startSystem(b, sysR3, 3, nil)),
	}
	m := map[string][]float64{}
	add := func(k string, v float64) { m[k] = append(m[k], v) }
	iter := 0
	for b.Loop() {
		got := map[string]fanoutResult{}
		for k := range runs {
			r := runs[(k+iter)%len(runs)]
			res := r.run(b)
			got[r.sys.name] = res
			add(r.sys.name+"_frames/s", res.framesPerSec)
			add(r.sys.name+"_flat_p99_ms", res.flatP99/1e3)
			add(r.sys.name+"_p50_us", res.p50)
			add(r.sys.name+"_p99_us", res.p99)
			add(r.sys.name+"_cpu_us/frame", res.cpuPerFrame)
			if r.sys.name != sysSingle {
				add(r.sys.name+"_remote_p99_us", res.remoteP99)
			}
		}
		add("r3_frames_ratio", got[sysR3].framesPerSec/got[sysSingle].framesPerSec)
		add("r3_p99_ratio", got[sysR3].p99/got[sysSingle].p99)
		b.Logf("iteration %d: frames/s single %.0f r3 %.0f; paced p50/p99 µs single %.0f/%.0f r3 %.0f/%.0f (remote p99 %.0f)", iter,
			got[sysSingle].framesPerSec, got[sysR3].framesPerSec, got[sysSingle].p50, got[sysSingle].p99,
			got[sysR3].p50, got[sysR3].p99, got[sysR3].remoteP99)
		iter++
	}
	for k, v := range m {
		b.ReportMetric(benchtest.Median(v), k)
	}
}

const (
	fanoutClients = 300
	fanoutFlat    = 2000            // deltas emitted flat out
	fanoutRate    = 100             // deltas/s in the paced phase
	fanoutWarm    = 50              // paced warm-up deltas, not measured
	fanoutPaced   = 2 * time.Second // measured part of the paced phase
)

type fanoutRun struct {
	sys   *system
	sid   string
	em    *bus.Emitter
	texts []string
}

type fanoutResult struct {
	framesPerSec, flatP99, cpuPerFrame float64
	p50, p99, remoteP99                float64 // paced, µs
}

func newFanoutRun(b *testing.B, s *system) *fanoutRun {
	sid, em := s.session(b, "")
	total := fanoutFlat + fanoutWarm + int(fanoutPaced/(time.Second/fanoutRate))
	return &fanoutRun{sys: s, sid: sid, em: em, texts: benchtest.DeltaTexts(total)}
}

// run connects the clients (evenly over the nodes), runs both phases
// and closes the clients.
func (r *fanoutRun) run(b *testing.B) fanoutResult {
	ctx := context.Background()
	total := len(r.texts)
	base := time.Now()
	rs := make([]*benchtest.Reader, fanoutClients)
	var remote []*benchtest.Reader // the clients of the nodes that do not own the tree
	for i := range rs {
		n := i % len(r.sys.nodes)
		ws, _, err := dial(ctx, r.sys.nodes[n], r.sid, []string{string(event.TextDelta)}, "")
		if err != nil {
			b.Fatalf("%s: client %d: %v", r.sys.name, i, err)
		}
		rs[i] = benchtest.NewReader(ws, base, total, true)
		if n != 0 {
			remote = append(remote, rs[i])
		}
	}
	defer benchtest.CloseAll(rs)
	settle(b, r.em)
	emitAt := make([]int64, total)

	// Flat out.
	cpu0 := cpu.Time()
	start := time.Now()
	for i := range fanoutFlat {
		emitAt[i] = int64(time.Since(base))
		if err := emitDelta(r.em, r.texts[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := benchtest.WaitGot(rs, fanoutFlat, 5*time.Minute); err != nil {
		b.Fatalf("%s flat out: %v", r.sys.name, err)
	}
	elapsed := time.Since(start)
	var res fanoutResult
	res.cpuPerFrame = float64(cpu.Time()-cpu0) / 1e3 / float64(fanoutClients*fanoutFlat)
	res.framesPerSec = float64(fanoutClients*fanoutFlat) / elapsed.Seconds()

	// Paced.
	send := func(i int) error { return emitDelta(r.em, r.texts[i]) }
	if err := benchtest.EmitPaced(base, emitAt, fanoutFlat, total, time.Second/fanoutRate, send); err != nil {
		b.Fatal(err)
	}
	if err := benchtest.WaitGot(rs, int64(total), 2*time.Minute); err != nil {
		b.Fatalf("%s paced: %v", r.sys.name, err)
	}
	benchtest.CloseAll(rs) // the samples are read once the readers are gone
	res.flatP99 = benchtest.Quantile(benchtest.Latencies(rs, emitAt, 0, fanoutFlat), 0.99)
	lat := benchtest.Latencies(rs, emitAt, fanoutFlat+fanoutWarm, total)
	res.p50, res.p99 = benchtest.Quantile(lat, 0.50), benchtest.Quantile(lat, 0.99)
	res.remoteP99 = benchtest.Quantile(benchtest.Latencies(remote, emitAt, fanoutFlat+fanoutWarm, total), 0.99)
	return res
}
