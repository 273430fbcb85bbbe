package bus

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// streamingFake is a fakeStore that also takes streaming events, and
// records the order in which catalog groups and streaming events reach
// it.
type streamingFake struct {
	*fakeStore
	mu    sync.Mutex
	order []string
}

func (s *streamingFake) Submit(ops []store.Op, done func(error)) {
	for _, op := range ops {
		if a, ok := op.(store.AppendEvent); ok {
			s.mu.Lock()
			s.order = append(s.order, a.Event.ID)
			s.mu.Unlock()
		}
	}
	s.fakeStore.Submit(ops, done)
}

func (s *streamingFake) AppendStreaming(ev *event.Event, done func(error)) {
	s.mu.Lock()
	s.order = append(s.order, ev.ID)
	s.mu.Unlock()
	done(nil)
}

// TestStreamingStoreGetsEveryEventInIDOrder: a store that keeps
// streaming events gets them, with the catalog groups, in id order.
func TestStreamingStoreGetsEveryEventInIDOrder(t *testing.T) {
	st := &streamingFake{fakeStore: newFakeStore()}
	rec := newRecorder(st.fakeStore)
	b := New(st, Options{Live: rec})
	em, err := b.Emitter(context.Background(), "sess_1")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 40 {
		typ := event.TextDelta
		if i%3 == 0 {
			typ = event.ToolCalled
		}
		ev, err := em.Emit(Spec{Type: typ, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ev.ID)
	}
	waitFor(t, "delivery", func() bool { return len(rec.events("sess_1")) == len(want) })
	closeAll(t, b, st.fakeStore)
	st.mu.Lock()
	defer st.mu.Unlock()
	if !slices.Equal(st.order, want) {
		t.Fatalf("the store got %v, want %v", st.order, want)
	}
}

// TestRelayDeliversToLiveSinksOnlyInOrder: a relayed event (committed by
// another node) reaches the live sinks, moves the seam, is never given
// to bus subscribers, and one at or before the seam is dropped.
func TestRelayDeliversToLiveSinksOnlyInOrder(t *testing.T) {
	st := newFakeStore()
	b := New(st, Options{})
	var subscribed atomic.Int64
	b.Subscribe("counter", func(context.Context, *event.Event) error { subscribed.Add(1); return nil }, SubscribeOptions{})
	var got []string
	var mu sync.Mutex
	b.AddLive(liveFunc(func(ev *event.Event) { mu.Lock(); got = append(got, ev.ID); mu.Unlock() }))
	seq, err := event.NewSequencer("", nil)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(typ event.Type) *event.Event {
		id, ts := seq.Next()
		ev := &event.Event{ID: id, Type: typ, SessionID: "sess_r", TS: ts, Actor: "test"}
		if err := ev.Seal(); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	e1, e2, e3 := mk(event.TurnStarted), mk(event.TextDelta), mk(event.TurnCompleted)
	for _, ev := range []*event.Event{e1, e2, e1, e3, e2} {
		if err := b.Relay(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	em, err := b.Emitter(context.Background(), "sess_r")
	if err != nil {
		t.Fatal(err)
	}
	em.WithDelivered(func(last string) {
		if last != e3.ID {
			t.Errorf("seam %s, want the last relayed event %s", last, e3.ID)
		}
	})
	closeAll(t, b, st)
	if want := []string{e1.ID, e2.ID, e3.ID}; !slices.Equal(got, want) {
		t.Fatalf("live sink got %v, want %v", got, want)
	}
	if n := subscribed.Load(); n != 0 {
		t.Fatalf("a bus subscriber got %d relayed events", n)
	}
}

// TestCatchUpMovesTheSeamToTheStore: a node that starts relaying a
// tree moves its delivery point to what its store holds; older relayed
// events are then dropped.
func TestCatchUpMovesTheSeamToTheStore(t *testing.T) {
	st := newFakeStore()
	b := New(st, Options{})
	em, err := b.Emitter(context.Background(), "sess_c")
	if err != nil {
		t.Fatal(err)
	}
	// Events stored after the emitter was made (the projection applied
	// them): the emitter's seam is stale until CatchUp.
	seq, err := event.NewSequencer("", nil)
	if err != nil {
		t.Fatal(err)
	}
	id, ts := seq.Next()
	stored := &event.Event{ID: id, Type: event.TurnStarted, SessionID: "sess_c", TS: ts, Actor: "test"}
	st.mu.Lock()
	stored.Seq = 1
	st.events = append(st.events, stored)
	st.mu.Unlock()
	if err := b.CatchUp(context.Background(), "sess_c"); err != nil {
		t.Fatal(err)
	}
	em.WithDelivered(func(last string) {
		if last != stored.ID {
			t.Errorf("seam %q after CatchUp, want %s", last, stored.ID)
		}
	})
	closeAll(t, b, st)
}

type liveFunc func(*event.Event)

func (f liveFunc) Publish(ev *event.Event) { f(ev) }

// TestRelayOfANewWorkerDeliversWhatTheStoreAlreadyHolds: a worker
// created on another node is first seen here when its events are
// relayed, after the projection stored them (the feed waits for it);
// making its emitter must not move the tree's delivery point to what
// the store holds, or the worker's events, and the planner's in
// between, would be dropped instead of delivered.
func TestRelayOfANewWorkerDeliversWhatTheStoreAlreadyHolds(t *testing.T) {
	st := newFakeStore()
	st.parents = map[string]string{"sess_w": "sess_p"}
	b := New(st, Options{})
	var got []string
	var mu sync.Mutex
	b.AddLive(liveFunc(func(ev *event.Event) { mu.Lock(); got = append(got, ev.ID); mu.Unlock() }))
	seq, err := event.NewSequencer("", nil)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(sid string, typ event.Type) *event.Event {
		id, ts := seq.Next()
		ev := &event.Event{ID: id, Type: typ, SessionID: sid, TS: ts, Actor: "test"}
		if err := ev.Seal(); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	p1 := mk("sess_p", event.ToolCalled)
	if err := b.Relay(context.Background(), p1); err != nil {
		t.Fatal(err)
	}
	// The projection stored the worker's creation and a turn start, and
	// the planner's next event, before the feed relays them.
	w1, w2, p2 := mk("sess_w", event.SessionCreated), mk("sess_w", event.TurnStarted), mk("sess_p", event.DelegateStarted)
	st.mu.Lock()
	for i, ev := range []*event.Event{w1, w2, p2} {
		ev.Seq = int64(i + 1)
		st.events = append(st.events, ev)
	}
	st.mu.Unlock()
	for _, ev := range []*event.Event{w1, w2, p2} {
		if err := b.Relay(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	closeAll(t, b, st)
	if want := []string{p1.ID, w1.ID, w2.ID, p2.ID}; !slices.Equal(got, want) {
		t.Fatalf("live sink got %v, want %v", got, want)
	}
}
