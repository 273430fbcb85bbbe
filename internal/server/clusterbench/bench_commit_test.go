package clusterbench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
)

// BenchmarkClusterCommit: catalog events committed per second through
// the bus (the emitter, then the store: SQLite's group commit on a
// single node; in cluster mode the tree owner's fenced publish, the
// stream's acknowledgement, a quorum of three servers for replicas 3,
// and the node's projection applying the event), for one metis node on
// a three-server NATS cluster (replicas 3) and on one NATS server
// (replicas 1), against single-node metis, in the same run. The event
// is a tool.called of about 400 bytes without store ops. Each
// iteration, for each system in turn (order alternating):
//
//   - one tree, pipelined: 1,000 events emitted into one session
//     without waiting, then a wait for the last (the emitter delivers
//     in order, so every one is committed by then);
//   - one tree, serial: 200 events, each waiting for its commit before
//     the next is emitted, as the agent loop does;
//   - 8 trees in parallel: 8 sessions (each its own tree), 250
//     pipelined events each, all at once.
//
// It reports:
//
//	{single,r1,r3}_{one,serial,parallel}_events/s   (median)
//	{r1,r3}_{one,serial,parallel}_ratio             over single's of
//	                                                the same iteration
//
//	go test -run '^$' -bench ClusterCommit -benchtime 1x -count 3 ./internal/server/clusterbench/
func BenchmarkClusterCommit(b *testing.B) {
	rigs := []*commitRig{
		newCommitRig(b, startSystem(b, sysSingle, 1, nil)),
		newCommitRig(b, startSystem(b, sysR1, 1, nil)),
		newCommitRig(b, startSystem(b, sysR3, 1, nil)),
	}
	m := map[string][]float64{}
	add := func(k string, v float64) { m[k] = append(m[k], v) }
	iter := 0
	for b.Loop() {
		got := map[string]map[string]float64{}
		for k := range rigs {
			r := rigs[(k+iter)%len(rigs)]
			res := map[string]float64{
				"one":      r.pipelined(b, r.one, commitOne),
				"serial":   r.serial(b, commitSerial),
				"parallel": r.pipelined(b, r.many, commitPerTree),
			}
			got[r.sys.name] = res
			for mode, v := range res {
				add(r.sys.name+"_"+mode+"_events/s", v)
			}
		}
		var line strings.Builder
		for _, name := range []string{sysSingle, sysR1, sysR3} {
			fmt.Fprintf(&line, " %s %.0f/%.0f/%.0f", name, got[name]["one"], got[name]["serial"], got[name]["parallel"])
			if name == sysSingle {
				continue
			}
			for mode, v := range got[name] {
				add(name+"_"+mode+"_ratio", v/got[sysSingle][mode])
			}
		}
		b.Logf("iteration %d: events/s one/serial/parallel:%s", iter, line.String())
		iter++
	}
	for k, v := range m {
		b.ReportMetric(benchtest.Median(v), k)
	}
}

const (
	commitOne     = 1000 // events into one tree, pipelined
	commitSerial  = 200  // events into one tree, one at a time
	commitTrees   = 8
	commitPerTree = 250 // events per tree, trees in parallel
)

// commitRig is one system's sessions: one tree, and commitTrees more.
type commitRig struct {
	sys  *system
	one  []*bus.Emitter
	many []*bus.Emitter
}

func newCommitRig(b *testing.B, s *system) *commitRig {
	r := &commitRig{sys: s}
	_, em := s.session(b, "")
	r.one = []*bus.Emitter{em}
	for range commitTrees {
		_, em := s.session(b, "")
		r.many = append(r.many, em)
	}
	return r
}

// toolCalled is a tool.called payload of about 400 bytes of event.
var toolCalled = json.RawMessage(`{"tool_call_id":"toolu_01BenchBenchBenchBenchBench","name":"read_file",` +
	`"input":{"path":"internal/server/clusterbench/bench_commit_test.go"},"message_id":"` + deltaMsgID + `",` +
	`"content_block_index":1,"note":"the quick brown fox jumps over the lazy dog, twice over the lazy dog"}`)

func commitSpec() bus.Spec {
	return bus.Spec{Type: event.ToolCalled, TurnID: "turn_bench", Actor: event.ActorAgent, Payload: toolCalled}
}

// pipelined emits n events into each emitter concurrently, without
// waiting, then waits for each one's last; it returns events/s.
func (r *commitRig) pipelined(b *testing.B, ems []*bus.Emitter, n int) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(ems))
	start := time.Now()
	for _, em := range ems {
		wg.Go(func() {
			for range n - 1 {
				if _, err := em.Emit(commitSpec()); err != nil {
					errs <- err
					return
				}
			}
			if _, err := em.EmitWait(ctx, commitSpec()); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatalf("%s: %v", r.sys.name, err)
	}
	return float64(n*len(ems)) / elapsed.Seconds()
}

// serial emits n events into the one tree, each waiting for its
// commit; it returns events/s.
func (r *commitRig) serial(b *testing.B, n int) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for range n {
		if _, err := r.one[0].EmitWait(ctx, commitSpec()); err != nil {
			b.Fatalf("%s: %v", r.sys.name, err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}
