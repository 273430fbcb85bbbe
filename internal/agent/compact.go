package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/compact"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// compactJob is one compaction of a session's conversation.
type compactJob struct {
	ctx       context.Context
	sessionID string
	turnID    string // "" for a compaction by hand
	id        string // a compaction by hand's id
	stored    []message.Message
	view      []message.Message
	modelID   string // the conversation's model (its window)
	adapter   model.Adapter
	lim       compact.Limits
	before    int
	trigger   string
	// instructions say what a summary must keep (a compaction by hand).
	instructions string
	emit         func(typ event.Type, payload any, ops ...store.Op) error
}

// compactResult is how a compaction ended.
type compactResult struct {
	msg       *message.Message // the compaction message stored; nil if none
	usage     message.Usage    // of the summary call, priced
	cancelled bool
	class     string // why nothing was stored
	text      string
}

// runCompaction runs a compaction (docs/context.md, "How metis
// compacts"): context.compacting, then the plan, the summary call when
// the plan needs one (on compaction-model, else the conversation's
// model), and context.compacted with the compaction message, or
// context.compaction_failed when nothing was stored. A summary call that
// fails (other than by cancellation) falls back to dropping the older
// part from the model's view, and says so (method drop, error). A
// cancelled compaction stores nothing and emits
// context.compaction_failed(cancelled); the caller ends the turn.
func (l *Loop) runCompaction(j compactJob) compactResult {
	started := time.Now()
	summariser, adapter := j.modelID, j.adapter
	if l.cfg.CompactionModel != "" {
		summariser = l.cfg.CompactionModel
		a, err := l.cfg.Models.Resolve(summariser)
		if err != nil {
			adapter = nil
			_, msg := model.Classify(err)
			l.cfg.Logger.Warn("compaction-model cannot be used", "model", summariser, "err", msg)
		} else {
			adapter = a
		}
	}
	if err := j.emit(event.ContextCompacting, protocol.ContextCompactingPayload{Trigger: j.trigger, CompactionID: j.id,
		TokensBefore: int64(j.before), ContextWindow: int64(j.lim.Window), Model: summariser}); err != nil {
		return compactResult{}
	}
	failed := func(res compactResult) compactResult {
		p := protocol.ContextCompactionFailedPayload{Trigger: j.trigger, CompactionID: j.id, ErrorClass: res.class,
			Message: res.text, DurationMS: time.Since(started).Milliseconds()}
		if res.usage != (message.Usage{}) {
			p.Usage = mustJSON(res.usage)
		}
		_ = j.emit(event.ContextCompactionFailed, p)
		return res
	}
	if j.ctx.Err() != nil {
		return failed(compactResult{cancelled: true, class: model.ClassCancelled, text: "cancelled: " + reasonOf(j.ctx)})
	}
	plan, err := compact.NewPlan(j.stored, j.view, j.lim, j.trigger, j.before)
	if err != nil {
		return failed(compactResult{class: protocol.ClassNoProgress,
			text: "nothing left to compact: the recent messages, which are always kept, are all the conversation holds"})
	}

	var res compactResult
	block := plan.Block
	errText := ""
	if block.Method == protocol.CompactSummary {
		var summary string
		summary, res.usage, err = l.summarise(j, plan, summariser, adapter)
		switch {
		case j.ctx.Err() != nil:
			res.cancelled, res.class, res.text = true, model.ClassCancelled, "cancelled: "+reasonOf(j.ctx)
			return failed(res)
		case err != nil:
			class, msg := model.Classify(err)
			errText = fmt.Sprintf("summarising with %s failed (%s): %s", summariser, class, msg)
			block, err = plan.Drop(fmt.Sprintf("metis dropped the %d messages before this point from the model's view without a summary: summarising them failed", plan.Folded))
		default:
			block, err = plan.Finish(summary)
		}
		if err != nil {
			res.class, res.text = protocol.ClassNoProgress, "the compaction would not make the conversation smaller"
			return failed(res)
		}
	}
	msg := message.Message{ID: event.NewID("msg_"), SessionID: j.sessionID, TurnID: j.turnID, Role: message.RoleUser,
		Status: message.StatusComplete, CreatedAt: time.Now().UTC(),
		Content: []message.Block{{Type: message.BlockCompaction, Compaction: &block}}}
	p := protocol.ContextCompactedPayload{TokensBefore: block.TokensBefore, TokensAfter: block.TokensAfter,
		Trigger: j.trigger, Method: block.Method, CompactionID: j.id, MessageID: msg.ID, Message: mustJSON(msg),
		MessagesStubbed: plan.Stubbed, DurationMS: time.Since(started).Milliseconds(), Error: errText}
	if block.Method != protocol.CompactStub {
		p.MessagesCompacted, p.Model = plan.Folded, summariser
	}
	if res.usage != (message.Usage{}) {
		p.Usage = mustJSON(res.usage)
	}
	if err := j.emit(event.ContextCompacted, p, store.PutMessage{Message: msg},
		contextSize(j.sessionID, int(block.TokensAfter), j.lim.Window)); err != nil {
		return compactResult{usage: res.usage}
	}
	res.msg = &msg
	return res
}

// summarise runs the summary call of a plan and returns the summary.
func (l *Loop) summarise(j compactJob, plan compact.Plan, modelID string, adapter model.Adapter) (string, message.Usage, error) {
	if adapter == nil {
		return "", message.Usage{}, &model.Error{Class: model.ClassUnavailable, Message: "compaction-model " + modelID + " cannot be used"}
	}
	window := l.cfg.Limits.Lookup(modelID).ContextWindow
	if window <= 0 || (j.lim.Window > 0 && j.lim.Window < window) {
		window = j.lim.Window
	}
	out := j.lim.SummaryTokens()
	room := window - window/20 - out - compact.SummaryOverhead
	transcript, _ := compact.Transcript(plan.Fold, max(room, 1024))
	req := compact.SummaryRequest(modelID, transcript, j.instructions, out)
	acc := &model.Accumulator{}
	res, err := adapter.Stream(j.ctx, req, acc.Apply)
	usage := res.Usage
	usage.CostUSD = l.cfg.Prices.Cost(modelID, usage)
	if err != nil {
		return "", usage, err
	}
	var text strings.Builder
	for _, b := range acc.Content() {
		if b.Type == message.BlockText {
			text.WriteString(b.Text)
		}
	}
	summary := strings.TrimSpace(text.String())
	if summary == "" {
		return "", usage, &model.Error{Class: model.ClassProviderError, Message: "the summary came back empty"}
	}
	return summary, usage, nil
}

// mustJSON encodes v, which always encodes (canonical types).
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("agent: encode %T: %v", v, err))
	}
	return b
}

// CompactRequest is a compaction by hand (POST /sessions/{id}/compact).
type CompactRequest struct {
	ID           string // the compaction's id, in its events
	SessionID    string
	Model        string // the session's model (its window)
	Emitter      *bus.Emitter
	Conversation []message.Message // every stored message, oldest first
	Prompt       PromptInput
	Instructions string
}

// CompactResult is how a compaction by hand ended.
type CompactResult struct {
	Message *message.Message // the compaction message; nil if none
	Usage   message.Usage
	// Class says why nothing was stored (cancelled, no_progress,
	// model_unavailable, or an emit failure's internal_error).
	Class string
}

// Compact runs a compaction by hand, outside any turn: it always
// summarises (when there is anything before the recent messages), and
// its events carry no turn id. ctx cancels it (context.compaction_failed
// with error_class cancelled).
func (l *Loop) Compact(ctx context.Context, c CompactRequest) CompactResult {
	prompt := l.SystemPrompt(c.Prompt)
	lim := l.cfg.Limits.Lookup(c.Model)
	maxTokens := l.cfg.MaxTokens
	if lim.MaxOutputTokens > 0 && lim.MaxOutputTokens < maxTokens {
		maxTokens = lim.MaxOutputTokens
	}
	view := viewOf(c.Conversation)
	fixed := fixedTokens(model.Request{System: prompt.Text, Tools: l.cfg.Tools.SpecsFor(c.Model)})
	before := compact.Estimate(c.Conversation, view, fixed)
	climits := compact.Limits{Window: lim.ContextWindow, Reserve: maxTokens, Fixed: fixed}
	if climits.Window <= 0 {
		climits = climits.Assumed(before)
	}
	var emitErr error
	adapter, err := l.cfg.Models.Resolve(c.Model)
	if err != nil {
		adapter = nil
	}
	res := l.runCompaction(compactJob{ctx: ctx, sessionID: c.SessionID, id: c.ID, stored: c.Conversation, view: view,
		modelID: c.Model, adapter: adapter, lim: climits, before: before, trigger: protocol.CompactManual,
		instructions: c.Instructions,
		emit: func(typ event.Type, payload any, ops ...store.Op) error {
			if emitErr != nil {
				return emitErr
			}
			_, emitErr = c.Emitter.EmitWait(context.Background(), bus.Spec{Type: typ, Actor: event.ActorSession, Payload: payload, Ops: ops})
			return emitErr
		}})
	out := CompactResult{Message: res.msg, Usage: res.usage, Class: res.class}
	if emitErr != nil && !errors.Is(emitErr, bus.ErrClosed) {
		out.Class = ClassInternal
		l.cfg.Logger.Error("compaction event not stored", "session", c.SessionID, "compaction", c.ID, "err", emitErr)
	}
	return out
}
