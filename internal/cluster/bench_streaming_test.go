package cluster_test

import (
	"context"
	"testing"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
)

// BenchmarkStreamingPublish is the owner's delta path on one in-process
// server with one replica, waiting for each ack: "fenced" as an owner
// publishes (the stream checks the tree's catalog tail, so a deposed
// owner adds nothing), "unfenced" the plain publish, for the cost of
// the check.
func BenchmarkStreamingPublish(b *testing.B) {
	for _, fenced := range []bool{true, false} {
		name := "unfenced"
		if fenced {
			name = "fenced"
		}
		b.Run(name, func(b *testing.B) {
			s := startServer(b)
			l := openLog(b, connect(b, s), cluster.LogConfig{})
			tree := newSessionID()
			ctx := context.Background()
			f, err := l.Claim(ctx, tree, "node-a", 1)
			if err != nil {
				b.Fatal(err)
			}
			// Catalog events before the deltas, as a turn has.
			for _, ev := range benchEvents(b, tree, 20, event.TurnStarted) {
				if _, err := f.PublishCatalog(ctx, ev, nil); err != nil {
					b.Fatal(err)
				}
			}
			evs := benchEvents(b, tree, b.N, event.TextDelta)
			b.ResetTimer()
			for i := range b.N {
				if fenced {
					_, err = f.PublishStreaming(ctx, evs[i])
				} else {
					_, err = l.PublishStreaming(ctx, tree, evs[i])
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
