package agent

import (
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Budgets (docs/context.md, "Budgets"): before each model call the loop
// estimates the call's cost, and a turn whose call would pass the turn's
// or the session's cost limit ends there, turn.completed(outcome failed,
// error_class budget_exceeded) with the limit in budget. max-calls ends
// a turn the same way with error_class max_llm_calls.

// nextCallCost estimates, in USD, the input of a call of est tokens on
// modelID: when the previous call of the view read or wrote the prompt
// cache, its prompt is taken to be read from the cache and the rest
// written to it; otherwise every token is priced as input. The answer's
// tokens are not counted: the limit is checked against what is known
// before the call.
func (r *run) nextCallCost(modelID string, est int, view []message.Message) float64 {
	p, ok := r.cfg.Prices.Lookup(modelID)
	if !ok {
		return 0
	}
	const perM = 1e6
	for i := len(view) - 1; i >= 0; i-- {
		u := view[i].Usage
		if view[i].Role != message.RoleAssistant || u == nil {
			continue
		}
		cached := int(u.InputTokens + u.CacheReadTokens + u.CacheCreationTokens)
		if u.CacheReadTokens+u.CacheCreationTokens == 0 || r.cfg.PromptCacheOff || cached > est {
			break
		}
		return float64(cached)*p.CacheRead/perM + float64(est-cached)*p.CacheWrite/perM
	}
	return float64(est) * p.Input / perM
}

// overBudget returns the limit the next call (of est tokens) would pass,
// or nil.
func (r *run) overBudget(p prepared) *protocol.TurnBudget {
	if r.t.MaxTurnCostUSD <= 0 && r.t.MaxSessionCostUSD <= 0 {
		return nil
	}
	next := r.nextCallCost(p.req.Model, p.est, p.req.Messages)
	turn := r.usage.CostUSD
	if l := r.t.MaxTurnCostUSD; l > 0 && turn+next > l {
		return &protocol.TurnBudget{Kind: protocol.BudgetTurnCost, Limit: l, Spent: turn, Next: next}
	}
	if l := r.t.MaxSessionCostUSD; l > 0 && r.t.SessionCostUSD+turn+next > l {
		return &protocol.TurnBudget{Kind: protocol.BudgetSessionCost, Limit: l, Spent: r.t.SessionCostUSD + turn, Next: next}
	}
	return nil
}

// endBudget ends the turn at a limit: error_class budget_exceeded for a
// cost limit, max_llm_calls for max-calls.
func (r *run) endBudget(b *protocol.TurnBudget) Outcome {
	class := protocol.ClassBudgetExceeded
	if b.Kind == protocol.BudgetCalls {
		class = "max_llm_calls"
	}
	if r.cancelledAtEnd(store.TurnFailed) {
		return r.cancelled("between_calls", "", nil)
	}
	r.emitEnd(event.TurnCompleted, turnCompleted{Outcome: "failed", ErrorClass: class, Usage: r.usage, Calls: r.calls,
		DurationMS: r.since(), Budget: b}, r.turnRow(store.TurnFailed, class))
	return Outcome{Status: store.TurnFailed, Reason: class, Usage: r.usage, FinalText: r.final}
}
