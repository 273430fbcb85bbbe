package clusterbench_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/benchtest/cpu"
	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// BenchmarkClusterReplay10k: a reconnecting client replays 10,000
// catalog events of one session, made by about 900 real builtin:demo
// turns with tools on a three-server NATS cluster (replicas 3), as
// internal/stream's BenchmarkReplay10k makes its history:
//
//   - single: a single-node server whose store holds the very same
//     events (the log applied to a fresh SQLite store by a projection,
//     before the server starts on it);
//   - warm: a node that followed the tree all along (its projection
//     holds it) and already serves a client of it (its feed runs);
//   - cold: a node started on an empty home for the replay: its
//     projection rebuilds from JetStream, the client retries its attach
//     while the node answers 404, then the node starts the tree's feed
//     and replays. Its time runs from the start of the node (server.New)
//     to the last frame read.
//
// The client subscribes with every catalog type (the store-facing half
// of preset:full) and since 10,000 events back, in a child process (so
// this process's CPU time, getrusage, is the servers': the metis nodes
// and the NATS servers). Each iteration replays 5 times on single and
// warm (alternating) and once on a cold node.
//
//	{single,warm,cold}_ms              replay time (median)
//	{single,warm,cold}_cpu_us/event    CPU per replayed event
//	warm_ratio, cold_ratio             over single's time in the same
//	                                   iteration (warm: per pair; cold:
//	                                   over the iteration's median)
//	cold_start_ms                      of cold_ms, node start to
//	                                   listening
//
//	go test -run '^$' -bench ClusterReplay10k -benchtime 1x -count 3 ./internal/server/clusterbench/
func BenchmarkClusterReplay10k(b *testing.B) {
	r := newReplayRig(b)
	child := benchtest.StartReplayClient(b)
	m := map[string][]float64{}
	add := func(k string, v float64) { m[k] = append(m[k], v) }
	iter := 0
	for b.Loop() {
		var single []float64
		for rep := range replayReps {
			order := []string{"single", "warm"}
			if (rep+iter)%2 == 1 {
				order = []string{"warm", "single"}
			}
			var got [2]float64
			for _, name := range order {
				ms, cpu := r.replay(b, child, name)
				add(name+"_ms", ms)
				add(name+"_cpu_us/event", cpu)
				if name == "single" {
					got[0] = ms
					single = append(single, ms)
				} else {
					got[1] = ms
				}
			}
			add("warm_ratio", got[1]/got[0])
		}
		ms, cpu, startMs := r.cold(b, child, iter)
		add("cold_ms", ms)
		add("cold_cpu_us/event", cpu)
		add("cold_start_ms", startMs)
		add("cold_ratio", ms/benchtest.Median(single))
		b.Logf("iteration %d: single %.1f ms, warm %.1f ms (medians of %d), cold %.1f ms (start %.1f ms)",
			iter, benchtest.Median(single), benchtest.Median(m["warm_ms"][len(m["warm_ms"])-replayReps:]), replayReps, ms, startMs)
		iter++
	}
	for k, v := range m {
		b.ReportMetric(benchtest.Median(v), k)
	}
}

const (
	replayEvents = 10_000
	replayReps   = 5
)

// replayRig holds the three replaying systems over one history.
type replayRig struct {
	r3     *system // nodes[0] made the history; nodes[1] is the warm node
	single *node
	sid    string
	since  string // the cluster nodes' cursor: exactly replayEvents follow it
	types  []string
	cur    *benchtest.Cursor // single-node's cursor (its subscribes add events)
	idle   func()            // closes the warm node's idle client
}

func newReplayRig(b *testing.B) *replayRig {
	ctx := context.Background()
	r := &replayRig{r3: startSystem(b, sysR3, 2, nil), types: benchtest.CatalogTypes()}
	r.sid = makeHistory(b, r.r3, replayEvents+200)
	owner, warm := r.r3.nodes[0], r.r3.nodes[1]
	want, err := owner.srv.Store.CountEvents(ctx, store.EventQuery{SessionIDs: []string{r.sid}})
	if err != nil {
		b.Fatal(err)
	}
	waitUntil(b, "the warm node's projection", func() bool {
		n, err := warm.srv.Store.CountEvents(ctx, store.EventQuery{SessionIDs: []string{r.sid}})
		return err == nil && n == want
	})
	if r.since, err = benchtest.NewCursor(warm.srv.Store, r.sid).Since(replayEvents); err != nil {
		b.Fatal(err)
	}
	// The warm node's feed runs while an idle client follows the tree.
	ws, _, err := dial(ctx, warm, r.sid, []string{string(event.TextDelta)}, "")
	if err != nil {
		b.Fatal(err)
	}
	r.idle = func() { ws.CloseNow() }
	b.Cleanup(r.idle)

	// Single-node metis on a store holding the same events: the log
	// applied by a projection to a fresh store, then a server started
	// on it.
	home := b.TempDir()
	projectInto(b, r.r3.urls[0], filepath.Join(home, "metis.db"))
	r.single = startNode(b, "single", home, nil)
	r.cur = benchtest.NewCursor(r.single.srv.Store, r.sid)
	if _, err := r.cur.Since(replayEvents); err != nil {
		b.Fatal(err)
	}
	return r
}

// replay runs one replay on single or warm and returns its time (ms)
// and this process's CPU per replayed event (µs).
func (r *replayRig) replay(b *testing.B, child *benchtest.ReplayClient, name string) (float64, float64) {
	n, since := r.r3.nodes[1], r.since
	if name == "single" {
		n = r.single
		// Each subscribe on the single node adds its client's
		// bus.subscriber_registered and _unregistered to the session:
		// once they are stored, the cursor is taken anew.
		em, err := n.srv.Bus.Emitter(context.Background(), r.sid)
		if err == nil {
			err = em.Barrier(context.Background())
		}
		if err == nil {
			since, err = r.cur.Since(replayEvents)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	res, cpu, err := child.Do(benchtest.ReplayCmd{Kind: benchtest.ReplayMetis, URL: n.url, SID: r.sid, Since: since, Types: r.types, N: replayEvents})
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	if name == "single" {
		// Let the server detach the client (and store its
		// unregistration) before the next cursor is taken.
		waitUntil(b, "the single node's client to leave", func() bool { return n.srv.Hub.Clients(r.sid) == 0 })
	}
	return float64(res.NS) / 1e6, float64(cpu) / 1e3 / replayEvents
}

// cold starts a node on an empty home, replays on it and stops it.
func (r *replayRig) cold(b *testing.B, child *benchtest.ReplayClient, iter int) (ms, cpuPerEvent, startMs float64) {
	url := r.r3.urls[len(r.r3.urls)-1]
	name := fmt.Sprintf("node-cold%d", iter)
	cpu0 := cpu.Time()
	t0 := time.Now()
	n := startNode(b, "cold", "", func(c *config.Config) { c.NATS, c.Node = url, name })
	started := time.Since(t0)
	res, _, err := child.Do(benchtest.ReplayCmd{Kind: benchtest.ReplayMetis, URL: n.url, SID: r.sid, Since: r.since, Types: r.types, N: replayEvents, Retry: true})
	if err != nil {
		b.Fatalf("cold: %v", err)
	}
	cpu := cpu.Time() - cpu0
	n.stop(b)
	return float64(started+time.Duration(res.NS)) / 1e6, float64(cpu) / 1e3 / replayEvents, float64(started) / 1e6
}

// projectInto applies the whole log to a fresh SQLite store at path,
// as a node's projection does, and closes the store.
func projectInto(b *testing.B, natsURL, path string) {
	ctx := context.Background()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	lg, err := cluster.OpenLog(ctx, nc, cluster.LogConfig{Retention: config.Defaults().Retention})
	if err != nil {
		b.Fatal(err)
	}
	last, err := lg.LastSeq(ctx)
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(ctx, store.Options{Path: path, Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	p := cluster.NewProjection(lg, st, "", benchLogger())
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	werr := p.WaitApplied(ctx, last)
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if werr != nil {
		b.Fatal(werr)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
}

// makeHistory creates a builtin:demo session on s's first node and runs
// turns there (list_dir, read_file of a 3 KiB file, short echoes) until
// its store holds at least n events of the session.
func makeHistory(b *testing.B, s *system, n int) string {
	owner := s.nodes[0]
	benchtest.WriteHistoryWorkspace(b, owner.ws)
	sid, _ := s.session(b, "builtin:demo")
	t0 := time.Now()
	turns := benchtest.RunHistory(b, owner.srv, sid, n)
	b.Logf("history: %d turns in %.1f s on %s", turns, time.Since(t0).Seconds(), s.name)
	return sid
}
