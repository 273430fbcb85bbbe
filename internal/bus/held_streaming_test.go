package bus

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/event"
)

// holdingStore is a StreamingStore that holds each streaming event's
// done until the test releases it, as a cluster node holds an event
// until it confirmed its lease.
type holdingStore struct {
	*fakeStore
	mu   sync.Mutex
	held []func(error)
}

func (s *holdingStore) AppendStreaming(_ *event.Event, done func(error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = append(s.held, done)
}

func (s *holdingStore) release(i int, err error) {
	s.mu.Lock()
	done := s.held[i]
	s.mu.Unlock()
	done(err)
}

// heldRecorder is a live sink that records the events delivered and
// the resyncs it is told of, by kind.
type heldRecorder struct {
	mu  sync.Mutex
	log []string
}

func (r *heldRecorder) Publish(ev *event.Event) { r.add("event " + ev.ID) }
func (r *heldRecorder) Resync(sid string)       { r.add("resync " + sid) }
func (r *heldRecorder) ResyncMoved(sid string)  { r.add("moved " + sid) }
func (r *heldRecorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}
func (r *heldRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// TestStreamingEventsWaitForTheStore: a streaming event of a store that
// keeps them is delivered only once the store says so, in id order
// with what follows it (a later event released first waits); one the
// store fails is dropped, never delivered, and the session's clients
// are resynchronised, as moved to another writer when the store's
// error says the tree is written elsewhere (ErrMoved).
func TestStreamingEventsWaitForTheStore(t *testing.T) {
	st := &holdingStore{fakeStore: newFakeStore()}
	rec := &heldRecorder{}
	b := New(st, Options{Live: rec})
	em, err := b.Emitter(context.Background(), "sess_h")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 4 {
		ev, err := em.Emit(Spec{Type: event.TextDelta, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	if got := rec.lines(); len(got) != 0 {
		t.Fatalf("delivered before the store released anything: %v", got)
	}
	st.release(1, nil) // the second waits for the first
	if got := rec.lines(); len(got) != 0 {
		t.Fatalf("delivered out of order: %v", got)
	}
	st.release(0, nil)
	st.release(2, errors.New("the log is unreachable"))
	st.release(3, nil)
	want := []string{"event " + ids[0], "event " + ids[1], "resync sess_h", "event " + ids[3]}
	if got := rec.lines(); !slices.Equal(got, want) {
		t.Fatalf("the sink got %v, want %v", got, want)
	}
	ev, err := em.Emit(Spec{Type: event.TextDelta, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	st.release(4, ErrMoved)
	want = append(want, "moved sess_h")
	if got := rec.lines(); !slices.Equal(got, want) {
		t.Fatalf("after an event of a moved tree (%s) the sink got %v, want %v", ev.ID, got, want)
	}
	closeAll(t, b, st.fakeStore)
}
