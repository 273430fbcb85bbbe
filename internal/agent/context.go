package agent

import (
	"github.com/metis-agent/metis/internal/compact"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// The context window (docs/context.md): before each model call the loop
// builds the request from the model's view of the stored conversation
// (compact.View), estimates its size (compact.Estimate: the provider's
// last count plus what was added since), and when the request would
// pass the window less the answer's reserve, compacts first. A provider
// that refuses a call as too long gets the call again, once, after a
// compaction. At most one compaction precedes a call: when nothing more
// can be compacted the call is made if it fits the window at all, and
// otherwise the turn fails with context_overflow, so a conversation
// whose recent part alone fills the window never loops.

// prepared is the next model call, before it is made.
type prepared struct {
	req model.Request
	est int // its size in tokens, estimated
	lim compact.Limits
}

// prepare builds the next request on modelID and estimates its size.
func (r *run) prepare(modelID string) prepared {
	lim := r.cfg.Limits.Lookup(modelID)
	maxTokens := r.cfg.MaxTokens
	if lim.MaxOutputTokens > 0 && lim.MaxOutputTokens < maxTokens {
		maxTokens = lim.MaxOutputTokens
	}
	tools, note := r.offered(modelID) // permissions.go
	req := model.Request{Model: modelID, System: r.prompt.Text + note, Messages: r.withImages(r.ctx, viewOf(r.conv), lim.Sees()), Tools: tools,
		MaxTokens: maxTokens, ThinkingBudget: r.cfg.ThinkingBudget, PromptCache: !r.cfg.PromptCacheOff}
	fixed := fixedTokens(req)
	return prepared{req: req, est: compact.Estimate(r.conv, req.Messages, fixed),
		lim: compact.Limits{Window: lim.ContextWindow, Reserve: maxTokens, Fixed: fixed}}
}

// viewOf is the conversation a model call sends: the model's view of
// the stored conversation, repaired (history.go).
func viewOf(stored []message.Message) []message.Message {
	return repairHistory(compact.View(stored))
}

// fixedTokens estimates a request's system prompt and tools.
func fixedTokens(req model.Request) int {
	return model.EstimateTokens(model.Request{System: req.System, Tools: req.Tools})
}

// fitOutcome is what making room before a call decided.
type fitOutcome int

const (
	fitGo        fitOutcome = iota // make the call
	fitCancelled                   // the turn was cancelled while compacting
	fitOverflow                    // the conversation cannot fit the window
	fitStopped                     // an event was not stored (emitErr)
)

// fit compacts the conversation if the call p would pass its window
// (unless automatic compaction is off), and returns the call to make.
func (r *run) fit(adapter model.Adapter, modelID string, p prepared) (prepared, fitOutcome) {
	if r.cfg.AutoCompactOff || !p.lim.Over(p.est) {
		return p, fitGo
	}
	return r.compactThenPrepare(adapter, modelID, protocol.CompactAuto, p.lim, p.est)
}

// recoverOverflow compacts after the provider refused a call as too
// long (window is the window its refusal named, 0 if none) and returns
// the call to retry.
func (r *run) recoverOverflow(adapter model.Adapter, modelID string, window int) (prepared, fitOutcome) {
	p := r.prepare(modelID)
	lim := p.lim
	if window > 0 && (lim.Window <= 0 || window < lim.Window) {
		lim.Window = window
	}
	if lim.Window <= 0 || !lim.Over(p.est) {
		// The window is unknown, or the estimate says the request fits
		// while the provider says it does not: take the request as the
		// size that did not fit.
		lim.Window = 0
		lim = lim.Assumed(p.est * 9 / 10)
	}
	return r.compactThenPrepare(adapter, modelID, protocol.CompactOverflow, lim, p.est)
}

// compactThenPrepare runs one compaction and prepares the call after
// it. A compaction that could not make progress (or failed) leaves the
// call to be made if it fits the window at all.
func (r *run) compactThenPrepare(adapter model.Adapter, modelID, trigger string, lim compact.Limits, before int) (prepared, fitOutcome) {
	stored := r.conv
	res := r.Loop.runCompaction(compactJob{ctx: r.ctx, sessionID: r.t.SessionID, turnID: r.t.ID, stored: stored,
		view: viewOf(stored), modelID: modelID, lim: lim, before: before, trigger: trigger, adapter: adapter,
		emit: func(typ event.Type, payload any, ops ...store.Op) error {
			r.emit(typ, event.ActorAgent, payload, ops...)
			return r.emitErr
		}})
	r.usage = r.usage.Add(res.usage)
	switch {
	case r.emitErr != nil:
		return prepared{}, fitStopped
	case res.cancelled:
		return prepared{}, fitCancelled
	case res.msg != nil:
		r.conv = append(r.conv, *res.msg)
	}
	p := r.prepare(modelID)
	if p.lim.Window > 0 && !p.lim.Fits(p.est) || trigger == protocol.CompactOverflow && res.msg == nil {
		return p, fitOverflow
	}
	return p, fitGo
}

// contextSize is the UpdateSession op that records a session's context
// size and window.
func contextSize(sessionID string, tokens, window int) store.Op {
	return store.UpdateSession{ID: sessionID, Context: &store.ContextSize{Tokens: int64(tokens), Window: int64(window)}}
}

// counted is the size of the conversation after a call as the provider
// counted it (the request and the answer), or 0 if it counted nothing.
func counted(u message.Usage) int {
	in := u.InputTokens + u.CacheReadTokens + u.CacheCreationTokens
	if in == 0 {
		return 0
	}
	return int(in + u.OutputTokens)
}

// Window returns a model's context window in tokens (0 when unknown).
func (l *Loop) Window(modelID string) int { return l.cfg.Limits.Lookup(modelID).ContextWindow }
