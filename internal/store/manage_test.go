package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

// TestMetaEventsAreNotActivity: a client attaching writes
// bus.subscriber_* events; they must not move the session's last
// activity, neither on the row nor in a summary as of that event.
func TestMetaEventsAreNotActivity(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	t0 := time.Unix(1700000000, 0).UTC()
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_a", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	ev := func(id string, typ event.Type, at time.Time) *event.Event {
		e := &event.Event{ID: id, SessionID: "sess_a", Type: typ, Actor: event.ActorBus, TS: at}
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
		return e
	}
	turn := ev("evt_1", event.TurnStarted, t0.Add(time.Minute))
	turn.Actor, turn.TurnID = event.ActorUser, "turn_1"
	if err := turn.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, AppendEvent{Event: turn},
		AppendEvent{Event: ev("evt_2", event.BusSubscriberRegistered, t0.Add(time.Hour))},
		AppendEvent{Event: ev("evt_3", event.BusSubscriberUnregister, t0.Add(2*time.Hour))}); err != nil {
		t.Fatal(err)
	}
	ss, err := s.Session(ctx, "sess_a")
	if err != nil || !ss.LastActivityAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("row: last activity %v (%v), want %v", ss.LastActivityAt, err, t0.Add(time.Minute))
	}
	sum, err := s.SummaryAsOf(ctx, "sess_a", "evt_3")
	if err != nil || !sum.LastActivityAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("summary: last activity %v (%v), want %v", sum.LastActivityAt, err, t0.Add(time.Minute))
	}
	if Activity(event.BusSubscriberRegistered) || Activity(event.BusHandlerWarning) || !Activity(event.TurnStarted) {
		t.Fatal("Activity: bus.* must not count, catalog events must")
	}
}

// TestRenameArchiveDelete: Rename replaces a title (and the first turn's
// SetTitle leaves it), SetArchived marks a session, DeleteTree removes a
// session with its workers and events, and each fails with ErrNotFound
// on an unknown session; DeleteTree refuses a tree with a turn in flight.
func TestRenameArchiveDelete(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	t0 := time.Unix(1700000000, 0).UTC()
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_p", CreatedAt: t0}},
		CreateSession{Session: Session{ID: "sess_w", ParentSessionID: "sess_p", CreatedAt: t0}},
		CreateSession{Session: Session{ID: "sess_other", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, Rename{SessionID: "sess_p", Title: "  my\nname "}, SetTitle{SessionID: "sess_p", Title: "first prompt"},
		SetArchived{SessionID: "sess_p", Archived: true}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Session(ctx, "sess_p")
	if err != nil || p.Title != "my name" || !p.Archived {
		t.Fatalf("renamed: %+v (%v)", p, err)
	}
	for _, op := range []Op{Rename{SessionID: "sess_nope", Title: "x"}, SetArchived{SessionID: "sess_nope", Archived: true}} {
		if err := s.Apply(ctx, op); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%T on an unknown session: %v", op, err)
		}
	}
	ev := &event.Event{ID: "evt_1", SessionID: "sess_w", Type: event.TurnStarted, TurnID: "turn_w", Actor: event.ActorUser, TS: t0}
	if err := ev.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, AppendEvent{Event: ev}, PutTurn{Turn: Turn{ID: "turn_w", SessionID: "sess_w", Status: TurnInFlight, StartedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteTree(ctx, "sess_p"); !errors.Is(err, ErrBusy) {
		t.Fatalf("delete with a worker's turn in flight: %v", err)
	}
	if err := s.Apply(ctx, PutTurn{Turn: Turn{ID: "turn_w", SessionID: "sess_w", Status: TurnCompleted, StartedAt: t0, EndedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteTree(ctx, "sess_p")
	if err != nil || n != 2 {
		t.Fatalf("delete: %d sessions (%v), want 2", n, err)
	}
	for _, id := range []string{"sess_p", "sess_w"} {
		if _, err := s.Session(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s after delete: %v", id, err)
		}
	}
	if evs, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_w"}}); err != nil || len(evs) != 0 {
		t.Fatalf("events after delete: %d (%v)", len(evs), err)
	}
	if _, err := s.Session(ctx, "sess_other"); err != nil {
		t.Fatalf("another session went too: %v", err)
	}
	if _, err := s.DeleteTree(ctx, "sess_p"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

// TestRemoveTreeIsIdempotent: RemoveTree (a deletion another node
// carried out) removes a session, its workers, their events and the
// images only they held, whatever state the tree is in (a worker's turn
// in flight included); an image another session links stays. Applying
// it again, or for a session never stored, succeeds and changes
// nothing, so a replayed deletion is harmless.
func TestRemoveTreeIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	t0 := time.Unix(1700000000, 0).UTC()
	own := Image{SHA256: "aa11", MediaType: "image/png", Size: 3, Width: 1, Height: 1, Data: []byte{1, 2, 3}}
	shared := Image{SHA256: "bb22", MediaType: "image/png", Size: 3, Width: 1, Height: 1, Data: []byte{4, 5, 6}}
	ev := &event.Event{ID: "evt_1", SessionID: "sess_w", Type: event.TurnStarted, TurnID: "turn_w", Actor: event.ActorUser, TS: t0}
	if err := ev.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_p", CreatedAt: t0}},
		CreateSession{Session: Session{ID: "sess_w", ParentSessionID: "sess_p", CreatedAt: t0}},
		CreateSession{Session: Session{ID: "sess_other", CreatedAt: t0}},
		PutImages{SessionID: "sess_p", Images: []Image{own, shared}},
		LinkImages{SessionID: "sess_other", SHA256s: []string{shared.SHA256}},
		AppendEvent{Event: ev}, PutTurn{Turn: Turn{ID: "turn_w", SessionID: "sess_w", Status: TurnInFlight, StartedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Apply(ctx, RemoveTree{SessionID: "sess_p"}, RemoveTree{SessionID: "sess_never"}); err != nil {
			t.Fatalf("RemoveTree: %v", err)
		}
		for _, id := range []string{"sess_p", "sess_w"} {
			if _, err := s.Session(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s after RemoveTree: %v", id, err)
			}
		}
		if evs, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_w"}}); err != nil || len(evs) != 0 {
			t.Fatalf("events after RemoveTree: %d (%v)", len(evs), err)
		}
		if _, err := s.ImageData(ctx, own.SHA256); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the tree's own image after RemoveTree: %v, want ErrNotFound", err)
		}
		if got, err := s.SessionImage(ctx, "sess_other", shared.SHA256); err != nil || string(got.Data) != string(shared.Data) {
			t.Fatalf("the image another session links: %+v, %v", got, err)
		}
		if _, err := s.Session(ctx, "sess_other"); err != nil {
			t.Fatalf("another session went too: %v", err)
		}
	}
}
