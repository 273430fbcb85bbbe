package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

func TestPrune(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	s.pruneChunk = 100
	now := time.Now()
	clock := now.Add(-48 * time.Hour)
	seq, err := event.NewSequencer("", func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	mk := func() *event.Event {
		id, ts := seq.Next()
		ev := &event.Event{ID: id, Type: event.TurnStarted, SessionID: "sess_a", TS: ts, Actor: event.ActorAgent, Payload: payload(1)}
		if err := ev.Seal(); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	// More old events than one chunk, so Prune takes several.
	old := make([]*event.Event, s.pruneChunk*2+10)
	for i := range old {
		old[i] = mk()
	}
	clock = now
	fresh := []*event.Event{mk(), mk(), mk()}
	appendAll(t, s, append(slices.Clone(old), fresh...))
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_a", CreatedAt: now.Add(-72 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}

	before := s.Stats().Commits
	r, err := s.Prune(ctx, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.Events != int64(len(old)) || r.Sessions != 0 {
		t.Fatalf("Prune deleted %d events and %d sessions, want %d and 0", r.Events, r.Sessions, len(old))
	}
	if c := s.Stats().Commits - before; c < 3 {
		t.Errorf("Prune took %d transactions, want chunks", c)
	}
	left, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(left), ids(fresh)) {
		t.Fatalf("left %v, want %v", ids(left), ids(fresh))
	}
	if oldest, _ := s.OldestEventID(ctx, "sess_a"); oldest != fresh[0].ID {
		t.Fatalf("OldestEventID = %s, want %s", oldest, fresh[0].ID)
	}
	if _, err := s.Session(ctx, "sess_a"); err != nil {
		t.Fatalf("Prune touched sessions: %v", err)
	}
	r, err = s.Prune(ctx, now.Add(-24*time.Hour))
	if err != nil || r != (PruneResult{}) {
		t.Fatalf("second Prune = %+v, %v", r, err)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}
