package bus

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// resyncRecorder is a live sink that also counts resyncs per session.
type resyncRecorder struct {
	*recorder
	mu      sync.Mutex
	resyncs map[string]int
}

func (r *resyncRecorder) Resync(sessionID string) {
	r.mu.Lock()
	r.resyncs[sessionID]++
	r.mu.Unlock()
}

// TestLostCommitIsReportedAndResynced: a catalog event whose commit
// fails is never delivered, EmitWait returns ErrNotCommitted wrapping
// the store's error, and live sinks that can resync are told, for that
// session only; events after it are delivered as usual.
func TestLostCommitIsReportedAndResynced(t *testing.T) {
	st := newFakeStore()
	disk := errors.New("disk full")
	st.fail = func(ops []store.Op) error {
		for _, op := range ops {
			if a, ok := op.(store.AppendEvent); ok && a.Event.Type == event.TurnCompleted {
				return disk
			}
		}
		return nil
	}
	rec := &resyncRecorder{recorder: newRecorder(st), resyncs: map[string]int{}}
	b := New(st, Options{Live: rec})
	defer closeAll(t, b, st)
	ctx := context.Background()
	em, err := b.Emitter(ctx, "sess_a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := em.EmitWait(ctx, Spec{Type: event.TurnStarted, TurnID: "turn_1", Actor: event.ActorUser}); err != nil {
		t.Fatal(err)
	}
	lost, err := em.EmitWait(ctx, Spec{Type: event.TurnCompleted, TurnID: "turn_1", Actor: event.ActorAgent})
	if !errors.Is(err, ErrNotCommitted) || !errors.Is(err, disk) || lost != nil {
		t.Fatalf("EmitWait of a lost event: %v, %v", lost, err)
	}
	after, err := em.EmitWait(ctx, Spec{Type: event.TurnCancelled, TurnID: "turn_1", Actor: event.ActorAgent})
	if err != nil {
		t.Fatal(err)
	}
	got := rec.events("sess_a")
	if len(got) != 2 || got[0].Type != event.TurnStarted || got[1] != after {
		t.Fatalf("delivered %v", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.resyncs["sess_a"] != 1 || len(rec.resyncs) != 1 {
		t.Fatalf("resyncs %v", rec.resyncs)
	}
}
