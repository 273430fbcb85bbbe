package cluster_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
)

var _ bus.Store = (*cluster.Store)(nil)

// seenAt records, for each event the live sink receives, how far the
// node's projection had applied the log at that moment.
type seenAt struct {
	proj *cluster.Projection
	mu   sync.Mutex
	at   map[string]uint64
	ids  []string
}

func (s *seenAt) Publish(ev *event.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at[ev.ID] = s.proj.Applied()
	s.ids = append(s.ids, ev.ID)
}

// clusterBus is a node's bus writing through the cluster store, the
// tree owned by this node.
func clusterBus(t *testing.T, rn *readNode, owner *cluster.Owner) (*bus.Bus, *seenAt) {
	t.Helper()
	cs := cluster.NewStore(rn.st, rn.proj, func(_ context.Context, tree string) (*cluster.Owner, error) {
		if tree != owner.Tree() {
			return nil, errors.New("not this test's tree")
		}
		return owner, nil
	})
	sink := &seenAt{proj: rn.proj, at: map[string]uint64{}}
	b := bus.New(cs, bus.Options{Live: sink})
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Errorf("bus close: %v", err)
		}
		cs.Close()
	})
	return b, sink
}

func TestBusOnTheClusterStoreCommitsToTheLogBeforeDelivery(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	b := newReadNode(t, s, "node-b", t.TempDir())
	tree := newSessionID()
	owner := a.own(t, tree)
	bs, sink := clusterBus(t, a, owner)

	em, err := bs.Attach(ctx(t), tree, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := em.EmitWait(ctx(t), bus.Spec{Type: event.SessionCreated, Actor: event.ActorSession, Payload: map[string]any{},
		Ops: []store.Op{store.CreateSession{Session: store.Session{ID: tree, WorkspacePath: "/w", ActiveModel: "builtin:demo", CreatedAt: now, LastActivityAt: now}}}}); err != nil {
		t.Fatal(err)
	}
	turnID := event.NewID("turn_")
	user := message.Message{ID: event.NewID("msg_"), SessionID: tree, TurnID: turnID, Role: message.RoleUser, Content: []message.Block{message.Text("hi")}, Status: message.StatusComplete, CreatedAt: now}
	if _, err := em.EmitWait(ctx(t), bus.Spec{Type: event.TurnStarted, TurnID: turnID, Actor: event.ActorSession, Payload: map[string]any{"user_message": user},
		Ops: []store.Op{store.PutTurn{Turn: store.Turn{ID: turnID, SessionID: tree, Status: store.TurnInFlight, StartedAt: now}}, store.PutMessage{Message: user}}}); err != nil {
		t.Fatal(err)
	}
	// A worker session joins the tree: its events go to the tree's subjects.
	worker := newSessionID()
	wem, err := bs.Attach(ctx(t), worker, tree)
	if err != nil {
		t.Fatal(err)
	}
	last, err := wem.EmitWait(ctx(t), bus.Spec{Type: event.SessionCreated, Actor: event.ActorSession, Payload: map[string]any{},
		Ops: []store.Op{store.CreateSession{Session: store.Session{ID: worker, ParentSessionID: tree, WorkspacePath: "/w", ActiveModel: "builtin:demo", CreatedAt: now, LastActivityAt: now}}}})
	if err != nil {
		t.Fatal(err)
	}

	// Every event the live sink got was in the log, and applied by the
	// node's store, before it was delivered.
	seqs := map[string]uint64{}
	var lastSeq uint64
	if err := a.log.Replay(ctx(t), cluster.TreeFilter(tree), 0, func(e cluster.Entry) error {
		if e.Event != nil {
			seqs[e.Event.ID] = e.Seq
			lastSeq = e.Seq
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := seqs[last.ID]; !ok {
		t.Fatalf("the worker's event %s is not on the tree's subjects", last.ID)
	}
	sink.mu.Lock()
	for _, id := range sink.ids {
		seq, ok := seqs[id]
		if !ok {
			t.Errorf("delivered %s, which is not in the log", id)
		} else if sink.at[id] < seq {
			t.Errorf("delivered %s (seq %d) when the store had applied only %d", id, seq, sink.at[id])
		}
	}
	if len(sink.ids) != 3 {
		t.Errorf("live sink got %d events, want 3", len(sink.ids))
	}
	sink.mu.Unlock()

	// Another node serves the same state.
	if err := b.proj.WaitApplied(ctx(t), lastSeq); err != nil {
		t.Fatal(err)
	}
	sameState(t, a.st, b.st, tree, []string{turnID})
	if w, err := b.st.Session(ctx(t), worker); err != nil || w.ParentSessionID != tree {
		t.Fatalf("node-b's worker row = %+v, %v", w, err)
	}
}

func TestBusOnTheClusterStoreStopsWhenFenced(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	// node-a is paused: its lease expires unnoticed.
	pausedA := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Second, Renew: time.Hour})
	pausedA.log = a.log
	b := newNode(t, s, "node-b", cluster.LeaseConfig{TTL: time.Second, Renew: liveRenew})
	tree := newSessionID()
	owner := pausedA.own(t, tree)
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
	b.ownEventually(t, tree)

	_, err = em.EmitWait(ctx(t), bus.Spec{Type: event.TurnStarted, TurnID: "turn_x", Actor: event.ActorSession, Payload: map[string]any{}})
	if !errors.Is(err, bus.ErrNotCommitted) || !errors.Is(err, cluster.ErrFenced) {
		t.Fatalf("emit by a stale owner: %v, want ErrNotCommitted and ErrFenced", err)
	}
	if !errors.Is(context.Cause(owner.Context()), cluster.ErrFenced) {
		t.Fatalf("stale owner's cause = %v, want ErrFenced", context.Cause(owner.Context()))
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.ids) != 1 {
		t.Fatalf("live sink got %d events, want only the one committed before the fence", len(sink.ids))
	}
}
