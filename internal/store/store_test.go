package store

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/event"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openTest opens a store in a fresh temporary directory and closes it
// when the test ends.
func openTest(tb testing.TB, opts Options) *Store {
	tb.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(tb.TempDir(), "trace.db")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := Open(context.Background(), opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// payload is a realistic llm.call_completed payload; with the envelope
// an event is about 300 bytes.
func payload(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"call_id":"call_%08d","model":"claude-sonnet-4-5",`+
		`"input_tokens":%d,"output_tokens":%d,"cache_read_tokens":0,"latency_ms":%d,`+
		`"stop_reason":"end_turn","cost_usd":0.0042}`, i, 1000+i%977, 100+i%331, 200+i%1000))
}

// eventMaker builds sealed events for one session with increasing ids.
type eventMaker struct {
	tb      testing.TB
	session string
	seq     *event.Sequencer
	n       int
}

func newMaker(tb testing.TB, session string) *eventMaker {
	seq, err := event.NewSequencer("", nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &eventMaker{tb: tb, session: session, seq: seq}
}

func (m *eventMaker) next(typ event.Type) *event.Event {
	id, ts := m.seq.Next()
	m.n++
	ev := &event.Event{ID: id, Type: typ, SessionID: m.session, TurnID: "turn_1", TS: ts,
		Actor: event.ActorAgent, Payload: payload(m.n)}
	if err := ev.Seal(); err != nil {
		m.tb.Fatal(err)
	}
	return ev
}

// types cycles through a few catalog types.
var types = []event.Type{event.TurnStarted, event.LLMCallStarted, event.LLMCallCompleted, event.TurnCompleted}

func (m *eventMaker) many(n int) []*event.Event {
	evs := make([]*event.Event, n)
	for i := range evs {
		evs[i] = m.next(types[i%len(types)])
	}
	return evs
}

func appendAll(tb testing.TB, s *Store, evs []*event.Event) {
	tb.Helper()
	ops := make([]Op, len(evs))
	for i, ev := range evs {
		ops[i] = AppendEvent{Event: ev}
	}
	if err := s.Apply(context.Background(), ops...); err != nil {
		tb.Fatalf("Apply: %v", err)
	}
}

func ids(evs []*event.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}
