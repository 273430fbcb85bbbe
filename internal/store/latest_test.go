package store

import (
	"bytes"
	"context"
	"slices"
	"testing"
)

// TestLatestEvents: a session's newest events up to an id, newest
// first, with their stored bytes, types, actors and times, at most the
// limit, stopping when fn says so; another session's are never read.
func TestLatestEvents(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	a, b := newMaker(t, "sess_a"), newMaker(t, "sess_b")
	var evsA []string
	for range 30 {
		ea, eb := a.many(1), b.many(1)
		appendAll(t, s, append(ea, eb...))
		evsA = append(evsA, ea[0].ID)
	}
	all, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a"}})
	if err != nil {
		t.Fatal(err)
	}
	read := func(upTo string, limit int, stop int) []string {
		t.Helper()
		var got []string
		n, err := s.LatestEvents(ctx, "sess_a", upTo, limit, func(r *EventRow) bool {
			ev := all[slices.Index(evsA, r.ID)]
			if !bytes.Equal(r.Body, ev.JSON()) || r.Type != ev.Type || r.Actor != ev.Actor || !r.TS.Equal(ev.TS) || r.SessionID != "sess_a" {
				t.Fatalf("row %s: %s/%s/%v %s, want %s/%s/%v %s", r.ID, r.Type, r.Actor, r.TS, r.Body, ev.Type, ev.Actor, ev.TS, ev.JSON())
			}
			got = append(got, r.ID)
			return len(got) != stop
		})
		if err != nil || n != len(got) {
			t.Fatalf("LatestEvents: %d read, %d handed over, %v", n, len(got), err)
		}
		return got
	}
	want := slices.Clone(evsA[20:])
	slices.Reverse(want)
	if got := read("", 10, 0); !slices.Equal(got, want) {
		t.Fatalf("newest 10: %v, want %v", got, want)
	}
	want = slices.Clone(evsA[:15])
	slices.Reverse(want)
	if got := read(evsA[14], 100, 0); !slices.Equal(got, want) {
		t.Fatalf("up to the 15th: %v, want %v", got, want)
	}
	if got := read("", 100, 3); !slices.Equal(got, []string{evsA[29], evsA[28], evsA[27]}) {
		t.Fatalf("stopped after 3: %v", got)
	}
	if _, err := s.LatestEvents(ctx, "sess_a", "", 0, func(*EventRow) bool { return true }); err == nil {
		t.Fatal("a limit of 0 was accepted")
	}
}
