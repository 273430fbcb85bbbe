package cluster_test

import (
	"testing"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
)

// TestAsyncStreamingPublishesKeepTheirOrder: streaming events sent
// without waiting for their acknowledgements, interleaved with fenced
// catalog publishes that do wait, are stored in the order they were
// sent: a replay of the tree gives every event in id order.
func TestAsyncStreamingPublishesKeepTheirOrder(t *testing.T) {
	s := startServer(t)
	n := newNode(t, s, "node-a", cluster.LeaseConfig{})
	tree := newSessionID()
	owner := n.own(t, tree)
	g := newEvents(t)
	var want []string
	for i := range 300 {
		if i%25 == 0 {
			ev := g.make(tree, event.ToolCalled, "turn_1", map[string]any{"i": i})
			if _, err := owner.PublishCatalog(ctx(t), ev, nil); err != nil {
				t.Fatal(err)
			}
			want = append(want, ev.ID)
			continue
		}
		ev := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "tok"})
		if err := owner.PublishStreamingAsync(ev); err != nil {
			t.Fatal(err)
		}
		want = append(want, ev.ID)
	}
	// A last synchronous publish: everything sent before it is stored.
	last := g.make(tree, event.TurnCompleted, "turn_1", map[string]any{})
	if _, err := owner.PublishCatalog(ctx(t), last, nil); err != nil {
		t.Fatal(err)
	}
	want = append(want, last.ID)
	var got []string
	if err := n.log.Replay(ctx(t), cluster.TreeFilter(tree), 0, func(e cluster.Entry) error {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		if !e.Marker {
			got = append(got, e.Event.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("replayed %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: %s, want %s", i, got[i], want[i])
		}
	}
}
