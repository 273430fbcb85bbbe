package cluster_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

var _ bus.StreamingStore = (*cluster.Store)(nil)

// appliedSink records, for each event an applied feed hands over, how
// far the node's projection had applied the log.
type appliedSink struct {
	proj *cluster.Projection
	mu   sync.Mutex
	ids  []string
	at   map[string]uint64
}

func (s *appliedSink) Publish(ev *event.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, ev.ID)
	s.at[ev.ID] = s.proj.Applied()
}

func (s *appliedSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// TestStreamingEventsReachOtherNodesInIDOrder: on the cluster store the
// bus publishes a tree's streaming events too, in id order with its
// catalog events; another node's applied feed hands the whole tree to
// its sink in that order, each catalog event only once that node's
// projection applied it.
func TestStreamingEventsReachOtherNodesInIDOrder(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	b := newReadNode(t, s, "node-b", t.TempDir())
	tree := newSessionID()
	owner := a.own(t, tree)
	bs, _ := clusterBus(t, a, owner)

	sink := &appliedSink{proj: b.proj, at: map[string]uint64{}}
	feeds := cluster.NewAppliedFeeds(b.log, b.proj, sink, nil)
	t.Cleanup(feeds.Close)
	leave, err := feeds.Join(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()

	em, err := bs.Attach(ctx(t), tree, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var want []string
	catalog := map[string]bool{}
	first, err := em.EmitWait(ctx(t), bus.Spec{Type: event.SessionCreated, Actor: event.ActorSession, Payload: map[string]any{},
		Ops: []store.Op{store.CreateSession{Session: store.Session{ID: tree, WorkspacePath: "/w", CreatedAt: now, LastActivityAt: now}}}})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, first.ID)
	catalog[first.ID] = true
	for i := range 30 {
		typ := event.TextDelta
		if i%5 == 4 {
			typ = event.ToolCalled
		}
		ev, err := em.Emit(bus.Spec{Type: typ, TurnID: "turn_x", Actor: event.ActorAgent, Payload: map[string]int{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ev.ID)
		catalog[ev.ID] = typ == event.ToolCalled
	}
	if err := em.Barrier(ctx(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(sink.got()) == len(want) })
	if got := sink.got(); !slices.Equal(got, want) {
		t.Fatalf("node b's feed handed over\n%v\nwant\n%v", got, want)
	}
	seqs := map[string]uint64{}
	if err := b.log.Replay(ctx(t), cluster.TreeFilter(tree), 0, func(e cluster.Entry) error {
		if e.Event != nil {
			seqs[e.Event.ID] = e.Seq
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, id := range sink.ids {
		if seqs[id] == 0 {
			t.Errorf("%s was handed over but is not in the log", id)
		}
	}
	for id := range catalog {
		if catalog[id] && sink.at[id] < seqs[id] {
			t.Errorf("catalog event %s (seq %d) handed over when node b had applied only %d", id, seqs[id], sink.at[id])
		}
	}
}
