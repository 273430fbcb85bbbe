package clustertest_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/natstest"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// BenchmarkFailover measures failover time: the owner of a tree, a
// metis node in a process of its own, is killed (SIGKILL) mid-turn, and
// the clock stops when a client of a surviving node receives the first
// event the new owner emitted (the interrupted turn's turn.cancelled).
// Each iteration kills a fresh owner process; the lease TTL is
// failoverTTL (renewals every third of it). It reports the medians of
// the iterations, split at the moment the benchmark's own lease watcher
// saw the dead owner's lease expire:
//
//	failover-ms  kill → the new owner's first event at the client
//	ttl-wait-ms  kill → lease expired (the bucket's marker seen)
//	takeover-ms  lease expired → the new owner's first event at the client
//
// Run it with a small -benchtime (each iteration starts a process and
// waits out a TTL): go test -run XXX -bench Failover -benchtime 5x.
func BenchmarkFailover(b *testing.B) { benchFailover(b, (*servertest.Child).Kill) }

// BenchmarkFailoverAfterPause is BenchmarkFailover with the owner paused
// (SIGSTOP) instead of killed: its NATS connection stays open and its
// routed requests' subscription with it, so nothing but the lease tells
// the other nodes it is gone. The target is a paused owner failing over
// as fast as a dead one: within the lease TTL plus a second.
func BenchmarkFailoverAfterPause(b *testing.B) {
	benchFailover(b, func(a *servertest.Child) { a.Pause(b) })
}

// benchFailover runs the failover benchmarks: fault stops the owner.
func benchFailover(b *testing.B, fault func(*servertest.Child)) {
	url := natstest.Start(b).URL
	nb := failoverNode(b, url, "node-b")
	failoverNode(b, url, "node-c")
	leases := benchLeases(b, url)
	var total, ttlWait, takeover []time.Duration
	for i := range b.N {
		b.StopTimer()
		a := startProcNode(b, url, fmt.Sprintf("node-a%d", i), failoverTTL, 5*time.Millisecond)
		sid := a.CreateSession()
		servertest.WaitFor(b, "the session on node-b", func() bool {
			return nb.Do(http.MethodGet, "/sessions/"+sid, nil, nil) == http.StatusOK
		})
		onB := streamtest.Attach(b, nb.URL, sid)
		onB.Subscribe("preset:full", nil, false)
		if f := onB.Read(wait); f.Ack == nil {
			b.Fatalf("want subscribe_ack, got %s", f.Raw)
		}
		turn := a.Submit(sid, "/long 5000")
		deltas := 0
		onB.Events(wait, func(e *protocol.EventEnvelope) bool {
			if e.Type == string(event.TextDelta) {
				deltas++
			}
			return deltas == 10
		})
		wctx, stop := context.WithTimeout(context.Background(), time.Minute)
		w, err := leases.Watch(wctx)
		if err != nil {
			b.Fatal(err)
		}
		gone := make(chan time.Time, 1)
		go func() {
			defer func() { _ = w.Stop() }()
			for {
				c, err := w.Next(wctx)
				if err != nil {
					return
				}
				if c.Tree == sid && c.Holder == "" {
					gone <- time.Now()
					return
				}
			}
		}()
		b.StartTimer()
		killed := time.Now()
		fault(a)
		onB.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
		first := time.Now()
		b.StopTimer()
		var expired time.Time
		select {
		case expired = <-gone:
		case <-time.After(wait):
			b.Fatal("the benchmark's lease watcher did not see the lease expire")
		}
		stop()
		onB.Close()
		a.Kill()
		total = append(total, first.Sub(killed))
		ttlWait = append(ttlWait, expired.Sub(killed))
		takeover = append(takeover, first.Sub(expired))
	}
	b.ReportMetric(medianMS(total), "failover-ms")
	b.ReportMetric(medianMS(ttlWait), "ttl-wait-ms")
	b.ReportMetric(medianMS(takeover), "takeover-ms")
	b.ReportMetric(float64(failoverTTL.Milliseconds()), "lease-ttl-ms")
}

// benchLeases opens the lease bucket for a watcher of the benchmark's
// own.
func benchLeases(b *testing.B, natsURL string) *cluster.Leases {
	b.Helper()
	_, js := natstest.Connect(b, natsURL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ls, err := cluster.OpenLeases(ctx, js, "bench-watcher", cluster.LeaseConfig{TTL: failoverTTL})
	if err != nil {
		b.Fatal(err)
	}
	return ls
}

func medianMS(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}
