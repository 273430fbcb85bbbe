package cluster_test

import (
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// TestBarrierWaitsForTheClusterStoresPublishes: on the cluster store,
// Emitter.Barrier returns only once every event emitted before it was
// published, applied and delivered, as it does on the SQLite store.
func TestBarrierWaitsForTheClusterStoresPublishes(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	tree := newSessionID()
	owner := a.own(t, tree)
	bs, sink := clusterBus(t, a, owner)
	em, err := bs.Attach(ctx(t), tree, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := em.EmitWait(ctx(t), bus.Spec{Type: event.SessionCreated, Actor: event.ActorSession, Payload: map[string]any{},
		Ops: []store.Op{store.CreateSession{Session: store.Session{ID: tree, WorkspacePath: "/w", CreatedAt: now, LastActivityAt: now}}}}); err != nil {
		t.Fatal(err)
	}
	want := 1
	for i := range 40 {
		typ := event.ToolCalled
		if i%2 == 1 {
			typ = event.TextDelta
		}
		if _, err := em.Emit(bus.Spec{Type: typ, TurnID: "turn_x", Actor: event.ActorAgent, Payload: map[string]int{"i": i}}); err != nil {
			t.Fatal(err)
		}
		want++
	}
	if err := em.Barrier(ctx(t)); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	got := len(sink.ids)
	sink.mu.Unlock()
	if got != want {
		t.Fatalf("after the barrier the live sink got %d events, want all %d", got, want)
	}
}
