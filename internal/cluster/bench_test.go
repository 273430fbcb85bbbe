package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// BenchmarkFencedCatalogPublish is the owner's commit path on one
// in-process server with one replica: a fenced publish of a catalog
// event carrying a message row, waiting for the stream's ack.
func BenchmarkFencedCatalogPublish(b *testing.B) {
	s := startServer(b)
	l := openLog(b, connect(b, s), cluster.LogConfig{})
	tree := newSessionID()
	f, err := l.Claim(context.Background(), tree, "node-a", 1)
	if err != nil {
		b.Fatal(err)
	}
	evs := benchEvents(b, tree, b.N, event.TurnStarted)
	ops := []store.Op{store.PutTurn{Turn: store.Turn{ID: "turn_1", SessionID: tree, Status: store.TurnInFlight, StartedAt: time.Now()}}}
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.PublishCatalog(context.Background(), evs[i], ops); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReplay10k replays a tree of 10,000 events (one catalog event
// per nine deltas) from the log with its ordered consumer.
func BenchmarkReplay10k(b *testing.B) {
	s := startServer(b)
	l := openLog(b, connect(b, s), cluster.LogConfig{})
	tree := newSessionID()
	ctx := context.Background()
	seq, _ := event.NewSequencer("", nil)
	for i := range 10_000 {
		typ := event.TextDelta
		if i%10 == 0 {
			typ = event.TurnStarted
		}
		id, ts := seq.Next()
		ev := &event.Event{ID: id, Type: typ, SessionID: tree, TurnID: "turn_1", TS: ts, Actor: event.ActorModel, Payload: []byte(`{"text":"some tokens of text"}`)}
		if err := ev.Seal(); err != nil {
			b.Fatal(err)
		}
		var err error
		if typ == event.TurnStarted {
			_, err = l.PublishCatalog(ctx, tree, ev, nil)
		} else {
			_, err = l.PublishStreaming(ctx, tree, ev)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		n := 0
		if err := l.Replay(ctx, cluster.TreeFilter(tree), 0, func(e cluster.Entry) error {
			if e.Err != nil {
				b.Fatal(e.Err)
			}
			n++
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if n != 10_000 {
			b.Fatalf("replayed %d events", n)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/replay")
}

func benchEvents(b *testing.B, session string, n int, typ event.Type) []*event.Event {
	seq, _ := event.NewSequencer("", nil)
	out := make([]*event.Event, n)
	for i := range out {
		id, ts := seq.Next()
		out[i] = &event.Event{ID: id, Type: typ, SessionID: session, TurnID: "turn_1", TS: ts, Actor: event.ActorAgent, Payload: []byte(`{}`)}
		if err := out[i].Seal(); err != nil {
			b.Fatal(err)
		}
	}
	return out
}
