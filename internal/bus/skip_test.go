package bus

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/event"
)

// skipRecorder is a live sink that records what Skipped tells it.
type skipRecorder struct {
	mu    sync.Mutex
	calls [][]string
}

func (*skipRecorder) Publish(*event.Event) {}

func (r *skipRecorder) Skipped(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, slices.Sorted(slices.Values(ids)))
}

func (r *skipRecorder) took() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

// store puts a committed event of sid in st without the bus (as a
// cluster node's projection applies another node's events).
func storeEvent(st *fakeStore, seq *event.Sequencer, sid string) *event.Event {
	id, ts := seq.Next()
	ev := &event.Event{ID: id, Type: event.ToolCalled, SessionID: sid, TS: ts, Actor: "test"}
	st.mu.Lock()
	ev.Seq = int64(len(st.events) + 1)
	st.events = append(st.events, ev)
	st.mu.Unlock()
	return ev
}

// TestSkippersToldWhenTheDeliveryPointSkips: every move of a tree's
// delivery point past events the live sinks were never handed (CatchUp,
// Resume, a worker joining its planner's outbox with newer stored
// events) tells the Skippers, naming the tree's sessions; a move that
// skips nothing, and ordinary delivery, do not.
func TestSkippersToldWhenTheDeliveryPointSkips(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	st.parents = map[string]string{"sess_w": "sess_p"}
	b := New(st, Options{})
	rec := &skipRecorder{}
	b.AddLive(rec)
	seq, err := event.NewSequencer("", nil)
	if err != nil {
		t.Fatal(err)
	}
	em, err := b.Emitter(ctx, "sess_p")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := em.EmitWait(ctx, Spec{Type: event.ToolCalled, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := seq.Observe(ev.ID); err != nil { // stored events come after it
		t.Fatal(err)
	}
	if got := rec.took(); got != nil {
		t.Fatalf("delivery told the skippers %v", got)
	}

	// A worker's emitter made from the store, whose newest stored event
	// is past the tree's delivery point.
	storeEvent(st, seq, "sess_w")
	if _, err := b.Emitter(ctx, "sess_w"); err != nil {
		t.Fatal(err)
	}
	if got := rec.took(); !slices.EqualFunc(got, [][]string{{"sess_p", "sess_w"}}, slices.Equal) {
		t.Fatalf("a worker joining with newer events: skippers told %v", got)
	}

	// CatchUp past a stored event (the tree is relayed from now on).
	storeEvent(st, seq, "sess_p")
	if err := b.CatchUp(ctx, "sess_p"); err != nil {
		t.Fatal(err)
	}
	if got := rec.took(); !slices.EqualFunc(got, [][]string{{"sess_p", "sess_w"}}, slices.Equal) {
		t.Fatalf("CatchUp past a stored event: skippers told %v", got)
	}
	// CatchUp with nothing new: nothing skipped.
	if err := b.CatchUp(ctx, "sess_p"); err != nil {
		t.Fatal(err)
	}
	if got := rec.took(); got != nil {
		t.Fatalf("CatchUp with nothing new told the skippers %v", got)
	}

	// Resume past a tail.
	tail, _ := seq.Next()
	if err := b.Resume(ctx, "sess_p", tail); err != nil {
		t.Fatal(err)
	}
	if got := rec.took(); !slices.EqualFunc(got, [][]string{{"sess_p", "sess_w"}}, slices.Equal) {
		t.Fatalf("Resume: skippers told %v", got)
	}
	closeAll(t, b, st)
}
