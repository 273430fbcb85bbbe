package agent

import (
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/store"
)

// callResult is how one model call ended.
type callResult struct {
	msg       message.Message // the assistant message, as persisted
	stop      string
	cancelled bool
	err       error
	class     string
	acc       *model.Accumulator
}

// call runs one model call, forwarding every delta as a streaming event
// and ending with message.complete and llm.call_completed, or on
// failure/cancel with the closing tool.use_end events, message.complete
// and llm.call_failed (spec §6.2.1).
func (r *run) call(adapter model.Adapter, modelID string, p prepared) callResult {
	r.calls++
	msgID := event.NewID("msg_")
	req := p.req
	started := time.Now()
	r.emit(event.LLMCallStarted, event.ActorAgent, llmCallStarted{MessageID: msgID, Model: modelID,
		CallIndex: r.calls - 1, Request: describe(p, r.prompt.SHA256)}, contextSize(r.t.SessionID, p.est, p.lim.Window))
	if r.emitErr != nil {
		return callResult{err: r.emitErr}
	}
	r.emit(event.MessageStart, event.ActorModel, messageStart{MessageID: msgID, Role: message.RoleAssistant, Model: modelID})

	acc := &model.Accumulator{}
	ids := toolIDs{}
	forward := func(d model.Delta) error {
		if d.Kind == model.KindToolUseStart {
			d.ToolUseID = ids.unique(d.ToolUseID)
		}
		if err := acc.Apply(d); err != nil {
			return &model.Error{Class: model.ClassProviderError, Message: "the model's stream was inconsistent: " + err.Error()}
		}
		r.forward(msgID, acc, d)
		return r.emitErr
	}
	res, err := adapter.Stream(r.ctx, req, forward)
	usage := res.Usage
	usage.CostUSD = r.cfg.Prices.Cost(modelID, usage)
	r.usage = r.usage.Add(usage)

	msg := message.Message{ID: msgID, SessionID: r.t.SessionID, TurnID: r.t.ID, Role: message.RoleAssistant,
		Model: modelID, Usage: &usage, CreatedAt: started}
	c := callResult{acc: acc}

	if err != nil {
		c.cancelled = r.ctx.Err() != nil
		for _, idx := range acc.CloseOpen() {
			b, _ := acc.Block(idx)
			r.emit(event.ToolUseEnd, event.ActorModel, toolUseEnd{MessageID: msgID, Index: idx, ToolUseID: b.ID, FinalInput: b.Input})
		}
		msg.Content = acc.Content()
		stop, class, text := model.StopErrorPartial, "", ""
		if c.cancelled {
			stop, class, msg.Status = model.StopCancelled, model.ClassCancelled, message.StatusCancelled
			text = "cancelled: " + reasonOf(r.ctx)
		} else {
			class, text = model.Classify(err)
			msg.Status = message.StatusFailed
		}
		r.emit(event.MessageComplete, event.ActorModel, messageComplete{MessageID: msgID, StopReason: stop, FinalContent: msg.Content, Usage: usage})
		r.emit(event.LLMCallFailed, event.ActorAgent, llmCallFailed{MessageID: msgID, Model: modelID, ErrorClass: class,
			Message: text, Usage: usage, DurationMS: time.Since(started).Milliseconds()}, store.PutMessage{Message: msg})
		c.msg, c.err, c.class = msg, err, class
		return c
	}

	msg.Content = acc.Content()
	msg.Status = message.StatusComplete
	if t := msg.PlainText(); t != "" {
		r.final = t
	}
	r.emit(event.MessageComplete, event.ActorModel, messageComplete{MessageID: msgID, StopReason: res.StopReason, FinalContent: msg.Content, Usage: usage})
	ops := []store.Op{store.PutMessage{Message: msg}}
	tools := map[string]*store.ToolCall{}
	var round []string
	if res.StopReason == model.StopToolUse {
		for _, b := range toolUses(msg) {
			row := &store.ToolCall{ID: b.ID, SessionID: r.t.SessionID, TurnID: r.t.ID, MessageID: msgID, Name: b.Name,
				Input: b.Input, Status: store.ToolPending, CreatedAt: time.Now(), UpdatedAt: time.Now()}
			tools[b.ID] = row
			round = append(round, b.ID)
			ops = append(ops, store.PutToolCall{Call: *row})
		}
	}
	size := counted(usage)
	if size == 0 {
		size = p.est + model.EstimateMessageTokens(msg.Content)
	}
	ops = append(ops, contextSize(r.t.SessionID, size, p.lim.Window))
	r.emit(event.LLMCallCompleted, event.ActorAgent, llmCallCompleted{MessageID: msgID, Model: modelID, StopReason: res.StopReason,
		Usage: usage, DurationMS: time.Since(started).Milliseconds(), ContextTokens: size, ContextWindow: p.lim.Window}, ops...)
	if r.emitErr == nil {
		// The round's rows exist in the store from here on.
		r.tools, r.round, r.settled = tools, round, map[string]bool{}
	}
	c.msg, c.stop = msg, res.StopReason
	return c
}

// forward emits the streaming event for one delta.
func (r *run) forward(msgID string, acc *model.Accumulator, d model.Delta) {
	switch d.Kind {
	case model.KindText:
		r.emit(event.TextDelta, event.ActorModel, textDelta{MessageID: msgID, Index: d.Index, Text: d.Text})
	case model.KindThinking:
		p := thinkingDelta{MessageID: msgID, Index: d.Index, Text: d.Text}
		if d.Signature != "" {
			sig := d.Signature
			p.Signature = &sig
		}
		r.emit(event.ThinkingDelta, event.ActorModel, p)
	case model.KindToolUseStart:
		r.emit(event.ToolUseStart, event.ActorModel, toolUseStart{MessageID: msgID, Index: d.Index, ToolUseID: d.ToolUseID, ToolName: d.ToolName})
	case model.KindToolInput:
		b, _ := acc.Block(d.Index)
		r.emit(event.ToolUseInputDelta, event.ActorModel, toolUseInputDelta{MessageID: msgID, Index: d.Index, ToolUseID: b.ID, PartialJSON: d.Text})
	case model.KindBlockStop:
		if b, ok := acc.Block(d.Index); ok && b.Type == message.BlockToolUse {
			r.emit(event.ToolUseEnd, event.ActorModel, toolUseEnd{MessageID: msgID, Index: d.Index, ToolUseID: b.ID, FinalInput: b.Input})
		}
	}
}
