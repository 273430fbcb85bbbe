package streamtest

import (
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

// The helpers below read the events a server delivered live (a test
// harness's recorder holds them, in id order).

// CountEvents counts the events of a type.
func CountEvents(evs []*event.Event, typ event.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// LastID is the id of the newest event ("" for none).
func LastID(evs []*event.Event) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].ID
}

// FirstOf returns the first event of a type and turn ("": any turn),
// failing the test, with who named, if there is none.
func FirstOf(t testing.TB, who string, evs []*event.Event, typ event.Type, turn string) *event.Event {
	t.Helper()
	for _, e := range evs {
		if e.Type == typ && (turn == "" || e.TurnID == turn) {
			return e
		}
	}
	t.Fatalf("%s delivered no %s for turn %q", who, typ, turn)
	return nil
}

// IDAt returns a well-formed event id whose ULID time is at.
func IDAt(t testing.TB, at time.Time) string {
	t.Helper()
	seq, err := event.NewSequencer("", func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	id, _ := seq.Next()
	return id
}
