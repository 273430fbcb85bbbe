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
}

// StartAccumulator subscribes the cost accumulator to b. It adds each
// llm call's usage.cost_usd (completed or failed) to its session's
// cost_so_far_usd and counts turn.started into turn_count. Its cursor is
// stored in the same transaction as each update, and on start it
// catches up from that cursor, so every event is counted exactly once
// across restarts and crashes.
func StartAccumulator(ctx context.Context, b *bus.Bus, st Store) error {
	from, err := st.Cursor(ctx, SubscriberName)
	if err != nil {
		return fmt.Errorf("cost accumulator: %w", err)
	}
	b.Subscribe(SubscriberName, func(ctx context.Context, ev *event.Event) error {
		add := store.AddUsage{SessionID: ev.SessionID}
		switch ev.Type {
		case event.TurnStarted:
			add.Turns = 1
		case event.LLMCallCompleted, event.LLMCallFailed:
			var p struct {
				Usage struct {
					CostUSD float64 `json:"cost_usd"`
				} `json:"usage"`
			}
			if err := ev.DecodePayload(&p); err != nil {
				return err
			}
			add.CostUSD = p.Usage.CostUSD
		}
		return st.Apply(ctx, add, store.SetCursor{Name: SubscriberName, Seq: ev.Seq})
	}, bus.SubscribeOptions{
		Types:   []event.Type{event.TurnStarted, event.LLMCallCompleted, event.LLMCallFailed},
		FromSeq: from,
		CatchUp: true,
	})
	return nil
}
