package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
)

func TestEventsRange(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	m := newMaker(t, "sess_a")
	evs := m.many(100)
	appendAll(t, s, evs)

	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d: Seq = %d, want %d", i, ev.Seq, i+1)
		}
	}

	got, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), ids(evs)) {
		t.Fatalf("all events: got %d ids, want %d in order", len(got), len(evs))
	}
	for i, ev := range got {
		if !bytes.Equal(ev.JSON(), evs[i].JSON()) {
			t.Fatalf("event %d: stored bytes differ:\n%s\n%s", i, ev.JSON(), evs[i].JSON())
		}
		if ev.Seq != evs[i].Seq || ev.Type != evs[i].Type || ev.TurnID != "turn_1" || !ev.TS.Equal(evs[i].TS) {
			t.Fatalf("event %d: decoded %+v, want %+v", i, ev, evs[i])
		}
	}

	// After an id, with a type filter and a limit.
	q := EventQuery{SessionIDs: []string{"sess_a"}, AfterID: evs[10].ID,
		Types: []event.Type{event.TurnStarted, event.TurnCompleted}, Limit: 5}
	got, err = s.Events(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ev := range evs[11:] {
		if ev.Type == event.TurnStarted || ev.Type == event.TurnCompleted {
			want = append(want, ev.ID)
		}
	}
	if !slices.Equal(ids(got), want[:5]) {
		t.Fatalf("filtered: got %v, want %v", ids(got), want[:5])
	}
	n, err := s.CountEvents(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Fatalf("CountEvents = %d, want %d (limit ignored)", n, len(want))
	}

	// One type.
	got, err = s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a"}, Types: []event.Type{event.LLMCallCompleted}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 25 {
		t.Fatalf("one type: %d events, want 25", len(got))
	}

	// Past the end.
	got, err = s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a"}, AfterID: evs[99].ID})
	if err != nil || len(got) != 0 {
		t.Fatalf("after last: %d events, %v", len(got), err)
	}
	if _, err := s.Events(ctx, EventQuery{}); err == nil {
		t.Fatal("query without session: no error")
	}

	first, err := s.OldestEventID(ctx, "sess_a")
	if err != nil || first != evs[0].ID {
		t.Fatalf("OldestEventID = %q, %v", first, err)
	}
	last, err := s.LastEventID(ctx, "sess_a")
	if err != nil || last != evs[99].ID {
		t.Fatalf("LastEventID = %q, %v", last, err)
	}
	last, err = s.LastEventID(ctx, "sess_none")
	if err != nil || last != "" {
		t.Fatalf("LastEventID(unknown) = %q, %v", last, err)
	}

	// EventAtOrBefore: the id itself when stored, else the one before it, within the sessions named.
	for _, c := range []struct {
		sessions []string
		id, want string
	}{
		{[]string{"sess_a"}, evs[42].ID, evs[42].ID},
		{[]string{"sess_none", "sess_a"}, evs[42].ID + "0", evs[42].ID},
		{[]string{"sess_none"}, evs[42].ID, ""},
		{[]string{"sess_a"}, "evt_0", ""},
	} {
		if got, err := s.EventAtOrBefore(ctx, c.sessions, c.id); got != c.want || err != nil {
			t.Errorf("EventAtOrBefore(%v, %s) = %q, %v; want %q", c.sessions, c.id, got, err, c.want)
		}
	}
}

func TestEventsMultiSession(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	a, b, c := newMaker(t, "sess_a"), newMaker(t, "sess_b"), newMaker(t, "sess_c")
	var all []*event.Event
	for range 30 {
		// Interleave the sessions; ids of different sessions made in
		// this order still sort by creation, except within one
		// millisecond where their random parts decide.
		evA, evB, evC := a.next(event.TurnStarted), b.next(event.TurnStarted), c.next(event.TurnStarted)
		appendAll(t, s, []*event.Event{evA, evB, evC})
		all = append(all, evA, evB)
	}
	got, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a", "sess_b"}})
	if err != nil {
		t.Fatal(err)
	}
	want := ids(all)
	slices.Sort(want)
	if !slices.Equal(ids(got), want) {
		t.Fatalf("multi-session: got %v, want %v", ids(got), want)
	}
	n, err := s.CountEvents(ctx, EventQuery{SessionIDs: []string{"sess_a", "sess_b", "sess_c"}})
	if err != nil || n != 90 {
		t.Fatalf("CountEvents = %d, %v; want 90", n, err)
	}
	got, err = s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a", "sess_b"}, AfterID: want[9], Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), want[10:20]) {
		t.Fatalf("multi-session page: got %v, want %v", ids(got), want[10:20])
	}
}

func TestEventsAfterSeq(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	a, b := newMaker(t, "sess_a"), newMaker(t, "sess_b")
	var all []*event.Event
	for range 20 {
		batch := []*event.Event{b.next(event.TurnStarted), a.next(event.TurnStarted)}
		appendAll(t, s, batch)
		all = append(all, batch...)
	}
	got, err := s.EventsAfterSeq(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), ids(all)) {
		t.Fatal("EventsAfterSeq(0) is not append order")
	}
	got, err = s.EventsAfterSeq(ctx, all[4].Seq, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), ids(all[5:8])) {
		t.Fatalf("EventsAfterSeq(%d, 3) = %v, want %v", all[4].Seq, ids(got), ids(all[5:8]))
	}
	for _, ev := range got {
		if ev.Seq <= all[4].Seq {
			t.Fatalf("seq %d not after %d", ev.Seq, all[4].Seq)
		}
	}
}

// TestCountUsesIndex checks that counting searches the (session, id)
// index, and reads no table row unless types are filtered.
func TestCountUsesIndex(t *testing.T) {
	s := openTest(t, Options{})
	for _, c := range []struct {
		q    EventQuery
		want string
	}{
		{EventQuery{SessionIDs: []string{"a"}}, "USING COVERING INDEX events_session_id"},
		{EventQuery{SessionIDs: []string{"a"}, AfterID: "evt_x"}, "USING COVERING INDEX events_session_id"},
		{EventQuery{SessionIDs: []string{"a", "b"}, AfterID: "evt_x"}, "USING COVERING INDEX events_session_id"},
		{EventQuery{SessionIDs: []string{"a"}, Types: []event.Type{event.TurnStarted}}, "USING INDEX events_session_id"},
		{EventQuery{SessionIDs: []string{"a"}, AfterID: "evt_x", Types: []event.Type{event.TurnStarted, event.TurnCompleted}},
			"USING INDEX events_session_id"},
	} {
		where, args, err := eventWhere(&c.q)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.rdb.Query("EXPLAIN QUERY PLAN SELECT count(*) FROM events WHERE "+where, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if !strings.HasPrefix(p, "SEARCH events "+c.want) {
			t.Errorf("count %+v: plan %q, want SEARCH %s", c.q, p, c.want)
		}
	}
}

func TestAppendRejectsBadEvents(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	m := newMaker(t, "sess_a")
	ev := m.next(event.TurnStarted)
	appendAll(t, s, []*event.Event{ev})
	if err := s.Apply(ctx, AppendEvent{Event: ev}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate append: %v, want ErrDuplicate", err)
	}
	if err := s.Apply(ctx, AppendEvent{}); err == nil {
		t.Fatal("nil event: no error")
	}
	if err := s.Apply(ctx, AppendEvent{Event: &event.Event{ID: "evt_1"}}); err == nil {
		t.Fatal("event without session: no error")
	}
	// Pointer ops work too.
	ev2 := m.next(event.TurnCompleted)
	if err := s.Apply(ctx, &AppendEvent{Event: ev2}); err != nil || ev2.Seq == 0 {
		t.Fatalf("pointer op: %v, seq %d", err, ev2.Seq)
	}
}
