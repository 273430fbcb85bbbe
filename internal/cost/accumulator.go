package cost

import (
	"context"
	"fmt"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// SubscriberName is the accumulator's subscription and cursor name.
const SubscriberName = "cost-accumulator"

// Store is what the accumulator needs of the trace store.
type Store interface {
	Apply(ctx context.Context, ops ...store.Op) error
	Cursor(ctx context.Context, name string) (int64, error)
	Session(ctx context.Context, id string) (store.Session, error)
}

// StartAccumulator subscribes the cost accumulator to b. It adds each
// llm call's usage.cost_usd (completed or failed, and a compaction's
// summary call, in context.compacted or context.compaction_failed) to its session's
// cost_so_far_usd, and to every ancestor's (a worker's cost rolls up into
// its planner's), and counts turn.started into turn_count. Its cursor is
// stored in the same transaction as each update, and on start it
// catches up from that cursor, so every event is counted exactly once
// across restarts and crashes.
func StartAccumulator(ctx context.Context, b *bus.Bus, st Store) error {
	from, err := st.Cursor(ctx, SubscriberName)
	if err != nil {
		return fmt.Errorf("cost accumulator: %w", err)
	}
	parents := map[string]string{} // session → parent; only the subscriber goroutine uses it
	ancestors := func(ctx context.Context, id string) ([]string, error) {
		var out []string
		for range 64 {
			p, ok := parents[id]
			if !ok {
				s, err := st.Session(ctx, id)
				if err != nil {
					return nil, err
				}
				p = s.ParentSessionID
				parents[id] = p
			}
			if p == "" {
				return out, nil
			}
			out = append(out, p)
			id = p
		}
		return out, nil
	}
	b.Subscribe(SubscriberName, func(ctx context.Context, ev *event.Event) error {
		turns, usd, err := contribution(ev)
		if err != nil {
			return err
		}
		add := store.AddUsage{SessionID: ev.SessionID, Turns: turns, CostUSD: usd}
		ops := []store.Op{add}
		if add.CostUSD != 0 {
			up, err := ancestors(ctx, ev.SessionID)
			if err != nil {
				return err
			}
			for _, a := range up {
				ops = append(ops, store.AddUsage{SessionID: a, CostUSD: add.CostUSD})
			}
		}
		return st.Apply(ctx, append(ops, store.SetCursor{Name: SubscriberName, Seq: ev.Seq})...)
	}, bus.SubscribeOptions{
		Types:   counted,
		FromSeq: from,
		CatchUp: true,
	})
	return nil
}

// counted are the event types the accumulator folds in.
var counted = []event.Type{event.TurnStarted, event.LLMCallCompleted, event.LLMCallFailed,
	event.ContextCompacted, event.ContextCompactionFailed}

// contribution is what one event adds to its session's counters (and,
// for cost, to every ancestor's).
func contribution(ev *event.Event) (turns int, usd float64, err error) {
	switch ev.Type {
	case event.TurnStarted:
		return 1, 0, nil
	case event.LLMCallCompleted, event.LLMCallFailed, event.ContextCompacted, event.ContextCompactionFailed:
		var p struct {
			Usage struct {
				CostUSD float64 `json:"cost_usd"`
			} `json:"usage"`
		}
		if err := ev.DecodePayload(&p); err != nil {
			return 0, 0, err
		}
		return 0, p.Usage.CostUSD, nil
	}
	return 0, 0, nil
}

// AsOfStore is what CountersAsOf reads.
type AsOfStore interface {
	ReadAsOf(ctx context.Context, sessionID, cursorName string, sessionIDs []string, types []event.Type, asOf string) (store.AsOf, error)
}

// CountersAsOf returns a session's turn_count and cost_so_far_usd exactly
// as of an event id (a snapshot's snapshot_at_event_id): the row the
// accumulator maintains, minus what it has folded in from later events,
// plus what it has yet to fold in from earlier ones. descendants are the
// session's workers (their costs roll up into it).
func CountersAsOf(ctx context.Context, st AsOfStore, sessionID string, descendants []string, asOf string) (int, float64, error) {
	r, err := st.ReadAsOf(ctx, sessionID, SubscriberName, append([]string{sessionID}, descendants...), counted, asOf)
	if err != nil {
		return 0, 0, err
	}
	turns, usd := r.Session.TurnCount, r.Session.CostUSD
	for sign, evs := range map[int][]*event.Event{-1: r.Applied, 1: r.Pending} {
		for _, ev := range evs {
			t, c, err := contribution(ev)
			if err != nil {
				return 0, 0, err
			}
			if ev.SessionID != sessionID {
				t = 0 // a worker's turns are its own
			}
			turns += sign * t
			usd += float64(sign) * c
		}
	}
	return turns, usd, nil
}
