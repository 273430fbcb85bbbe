package store

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/event"
)

// TestFaultHookFailsOnlyTheMatchingSubmission: a failure injected into
// every transaction holding one event fails that submission alone (its
// done gets the error, nothing of it is stored); the submissions grouped
// with it commit; removing the hook lets the same write commit.
func TestFaultHookFailsOnlyTheMatchingSubmission(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	m := newMaker(t, "sess_f")
	evs := m.many(5)
	bad := evs[2]
	s.SetFault(func(ops []Op) error {
		for _, op := range ops {
			if a, ok := op.(AppendEvent); ok && a.Event == bad {
				return ErrInjected
			}
		}
		return nil
	})
	var wg sync.WaitGroup
	errs := make([]error, len(evs))
	wg.Add(len(evs))
	for i, ev := range evs {
		s.Submit([]Op{AppendEvent{Event: ev}}, func(err error) { errs[i] = err; wg.Done() })
	}
	wg.Wait()
	for i, err := range errs {
		if (i == 2) != errors.Is(err, ErrInjected) {
			t.Fatalf("submission %d: %v", i, err)
		}
	}
	got, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_f"}})
	if err != nil || len(got) != 4 {
		t.Fatalf("stored %d events (%v), want 4", len(got), err)
	}
	for _, e := range got {
		if e.ID == bad.ID {
			t.Fatal("the failed event was stored")
		}
	}
	if st := s.Stats(); st.Failed != 1 || st.Rollbacks == 0 {
		t.Fatalf("stats %+v", st)
	}
	s.SetFault(nil)
	bad.Seq = 0
	if err := s.Apply(ctx, AppendEvent{Event: bad}); err != nil {
		t.Fatalf("after the hook is removed: %v", err)
	}
}

// TestFailMatching: times 2 loses exactly one submission of the matching
// event type; the next one commits.
func TestFailMatching(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	m := newMaker(t, "sess_m")
	s.SetFault(FailMatching(2, func(ops []Op) bool { return HasEvent(ops, event.TurnCompleted) }))
	if err := s.Apply(ctx, AppendEvent{Event: m.next(event.TurnStarted)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, AppendEvent{Event: m.next(event.TurnCompleted)}); !errors.Is(err, ErrInjected) {
		t.Fatalf("first turn.completed: %v", err)
	}
	if err := s.Apply(ctx, AppendEvent{Event: m.next(event.TurnCompleted)}); err != nil {
		t.Fatalf("second turn.completed: %v", err)
	}
}
