package store

import (
	"bytes"
	"context"
	"testing"

	"github.com/metis-agent/metis/internal/event"
)

// TestScanEventBatch: reading a session's events in batches, each
// continuing after the last id of the one before, gives exactly what one
// ordered read gives (ids, types, actors, bytes), for every batch size,
// with and without type, actor and upper-bound filters, and never an
// event of another session.
func TestScanEventBatch(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	a, b := newMaker(t, "sess_a"), newMaker(t, "sess_b")
	var evs []*event.Event
	for i := range 40 {
		ev := a.next(types[i%len(types)])
		if i%3 == 0 {
			ev = a.sized(types[i%len(types)], 50*i)
			ev.Actor = event.ActorTool
			if err := ev.Seal(); err != nil {
				t.Fatal(err)
			}
		}
		evs = append(evs, ev, b.next(event.TurnStarted))
	}
	appendAll(t, s, evs)
	all, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []EventQuery{
		{SessionIDs: []string{"sess_a"}},
		{SessionIDs: []string{"sess_a"}, AfterID: all[4].ID, UpToID: all[33].ID},
		{SessionIDs: []string{"sess_a"}, Types: []event.Type{event.TurnStarted, event.LLMCallCompleted}},
		{SessionIDs: []string{"sess_a"}, Actors: []string{event.ActorTool}, AfterID: all[2].ID},
	} {
		var want []EventRow
		if err := s.ScanEvents(ctx, q, func(r EventRow) error {
			want = append(want, r)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(want) < 5 {
			t.Fatalf("%+v: only %d events: the test would prove little", q, len(want))
		}
		for _, size := range []int{1, 3, len(want) - 1, len(want), len(want) + 1, 512} {
			var got []EventRow
			bq := q
			for {
				n, err := s.ScanEventBatch(ctx, bq, size, func(r *EventRow) {
					c := *r
					c.Body = bytes.Clone(r.Body)
					got = append(got, c)
				})
				if err != nil {
					t.Fatal(err)
				}
				if n > size {
					t.Fatalf("batch of %d rows, limit %d", n, size)
				}
				if n < size {
					break
				}
				bq.AfterID = got[len(got)-1].ID
			}
			if len(got) != len(want) {
				t.Fatalf("%+v in batches of %d: %d events, want %d", q, size, len(got), len(want))
			}
			for i, w := range want {
				g := got[i]
				if g.ID != w.ID || g.SessionID != w.SessionID || g.Type != w.Type || g.Actor != w.Actor || !bytes.Equal(g.Body, w.Body) {
					t.Fatalf("%+v in batches of %d: event %d is %s %s %s %s %q, want %s %s %s %s %q", q, size, i,
						g.ID, g.SessionID, g.Type, g.Actor, g.Body, w.ID, w.SessionID, w.Type, w.Actor, w.Body)
				}
			}
		}
	}
	for _, bad := range []struct {
		q     EventQuery
		limit int
	}{
		{EventQuery{SessionIDs: []string{"sess_a", "sess_b"}}, 10},
		{EventQuery{}, 10},
		{EventQuery{SessionIDs: []string{"sess_a"}}, 0},
	} {
		if _, err := s.ScanEventBatch(ctx, bad.q, bad.limit, func(*EventRow) {}); err == nil {
			t.Fatalf("%+v, limit %d: no error", bad.q, bad.limit)
		}
	}
}
