package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

// TestSuspendRefusesTheTreesEmitsAndResumeSeedsItsIDs: once a tree is
// suspended (its node lost it), every emit into any of its sessions
// fails with ErrClosed (the cause wrapped), other trees are untouched,
// the tree's clients are told to resync, and relayed events still
// reach the live sinks. Resume after another writer's tail makes every
// new id sort after that tail and moves the seam there.
func TestSuspendRefusesTheTreesEmitsAndResumeSeedsItsIDs(t *testing.T) {
	st := newFakeStore()
	st.parents = map[string]string{"sess_worker": "sess_root"}
	rec := &resyncRecorder{recorder: newRecorder(st), resyncs: map[string]int{}}
	b := New(st, Options{Live: rec})
	ctx := context.Background()
	root, err := b.Emitter(ctx, "sess_root")
	if err != nil {
		t.Fatal(err)
	}
	worker, err := b.Emitter(ctx, "sess_worker")
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.Emitter(ctx, "sess_other")
	if err != nil {
		t.Fatal(err)
	}
	started, err := root.EmitWait(ctx, Spec{Type: event.TurnStarted, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}

	lost := errors.New("lease lost")
	if err := b.Suspend(ctx, "sess_root", lost); err != nil {
		t.Fatal(err)
	}
	for _, em := range []*Emitter{root, worker} {
		for _, typ := range []event.Type{event.TextDelta, event.TurnCompleted} {
			if _, err := em.Emit(Spec{Type: typ, Actor: "test"}); !errors.Is(err, ErrClosed) || !errors.Is(err, lost) {
				t.Fatalf("%s into %s after Suspend: %v, want ErrClosed wrapping the cause", typ, em.SessionID(), err)
			}
		}
	}
	if _, err := other.EmitWait(ctx, Spec{Type: event.TurnStarted, Actor: "test"}); err != nil {
		t.Fatalf("another tree's emit: %v", err)
	}
	rec.mu.Lock()
	resyncs := rec.resyncs["sess_root"] + rec.resyncs["sess_worker"]
	rec.mu.Unlock()
	if resyncs != 2 {
		t.Fatalf("resyncs %v, want one for each session of the tree", rec.resyncs)
	}

	// The tree's new writer emitted further; its events are relayed.
	// Its ids sort after this node's last one (its sequencer was seeded
	// past it, as a takeover's is): ids drawn in the same millisecond
	// from an unseeded generator need not.
	writer, err := event.NewSequencer(started.ID, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	var tail string
	for range 3 {
		tail, _ = writer.Next()
	}
	relayed := &event.Event{ID: tail, Type: event.TextDelta, SessionID: "sess_worker", Actor: "test"}
	if err := relayed.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := b.Relay(ctx, relayed); err != nil {
		t.Fatal(err)
	}
	if got := rec.events("sess_worker"); len(got) != 1 || got[0].ID != tail {
		t.Fatalf("relayed while suspended: %v", got)
	}

	// This node takes the tree back, after a tail whose writer's clock
	// ran an hour ahead of this node's.
	ahead, err := event.NewSequencer("", func() time.Time { return time.Now().Add(time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	later, _ := ahead.Next()
	if err := b.Resume(ctx, "sess_root", later); err != nil {
		t.Fatal(err)
	}
	if got := worker.LastDelivered(); got != later {
		t.Fatalf("seam %s after Resume, want the tail %s", got, later)
	}
	ev, err := root.EmitWait(ctx, Spec{Type: event.TurnCancelled, Actor: "test"})
	if err != nil {
		t.Fatalf("emit after Resume: %v", err)
	}
	if ev.ID <= later {
		t.Fatalf("new id %s does not sort after the tail %s", ev.ID, later)
	}
	closeAll(t, b, st)
}
