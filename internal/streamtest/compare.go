package streamtest

import (
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// IDs lists the ids of events a client received.
func IDs(evs []*protocol.EventEnvelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// EventIDs lists the ids of events as the server recorded them.
func EventIDs(evs []*event.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// Types lists the types of events a client received.
func Types(evs []*protocol.EventEnvelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// Collapse lists types with each run of one type folded into one entry.
func Collapse(ts []string) []string {
	var out []string
	for _, t := range ts {
		if len(out) == 0 || out[len(out)-1] != t {
			out = append(out, t)
		}
	}
	return out
}

// CountType counts events of a type.
func CountType(evs []*protocol.EventEnvelope, typ event.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == string(typ) {
			n++
		}
	}
	return n
}

// CheckIncreasing fails unless every id is after `after` and the ids
// strictly increase (which also rules out duplicates).
func CheckIncreasing(t testing.TB, what string, evs []*protocol.EventEnvelope, after string) {
	t.Helper()
	prev := after
	for i, e := range evs {
		if e.ID <= prev {
			t.Fatalf("%s: event %d (%s %s) is not after %q", what, i, e.ID, e.Type, prev)
		}
		prev = e.ID
	}
}

// Between returns the events with after < id <= upTo ("" for no upper
// bound) whose type is in set (nil: all), in their order.
func Between(evs []*event.Event, after, upTo string, set map[string]bool) []*event.Event {
	var out []*event.Event
	for _, e := range evs {
		if e.ID <= after || upTo != "" && e.ID > upTo {
			continue
		}
		if set == nil || set[string(e.Type)] {
			out = append(out, e)
		}
	}
	return out
}

// SameIDs fails unless a client's events are exactly want (what the
// server delivered), in order, naming the first difference.
func SameIDs(t testing.TB, what string, got []*protocol.EventEnvelope, want []*event.Event) {
	t.Helper()
	g, w := IDs(got), EventIDs(want)
	if slices.Equal(g, w) {
		return
	}
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	describe := func(list []string, typeAt func(int) string) string {
		if i >= len(list) {
			return "(end)"
		}
		return list[i] + " " + typeAt(i)
	}
	t.Fatalf("%s: %d events, want %d; first difference at %d: got %s, want %s", what, len(g), len(w), i,
		describe(g, func(k int) string { return got[k].Type }),
		describe(w, func(k int) string { return string(want[k].Type) }))
}
