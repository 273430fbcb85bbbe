package anthropic

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// translator turns the events of one Anthropic stream into canonical
// deltas, and collects usage and the stop reason.
type translator struct {
	model.DeltaSink
	log *slog.Logger

	blocks  map[int]*block
	usage   message.Usage
	rawStop string
	done    bool // message_stop seen
}

// block is the state of one content block of the stream.
type block struct {
	typ string // message.BlockText, BlockThinking or BlockToolUse
	id  string // tool_use

	// pendingInput is the input a tool_use content_block_start carried
	// when it was not empty ({}); it is emitted at block stop unless
	// input_json_delta fragments arrived, which then are the input.
	pendingInput string
	streamed     bool            // a non-empty input_json_delta arrived
	input        strings.Builder // the input fragments emitted

	startSig string // signature carried by a thinking content_block_start
	sigSent  bool
	stopped  bool
}

// handle translates one event. It returns the emit error, a cancellation,
// or a *model.Error for a stream that contradicts itself.
func (t *translator) handle(ev *event) error {
	if ev.isDelta {
		if t.blocks == nil {
			t.blocks = map[int]*block{}
		}
		return t.delta(int(ev.delta.Index), ev.delta.Delta)
	}
	return t.handleFull(*ev.full)
}

// handleFull translates one event decoded into the SDK's full union.
func (t *translator) handleFull(ev sdk.MessageStreamEventUnion) error {
	if t.blocks == nil {
		t.blocks = map[int]*block{}
	}
	switch e := ev.AsAny().(type) {
	case sdk.MessageStartEvent:
		u := e.Message.Usage
		t.usage.InputTokens = u.InputTokens
		t.usage.OutputTokens = u.OutputTokens
		t.usage.CacheReadTokens = u.CacheReadInputTokens
		t.usage.CacheCreationTokens = u.CacheCreationInputTokens
	case sdk.ContentBlockStartEvent:
		return t.start(int(e.Index), e.ContentBlock)
	case sdk.ContentBlockDeltaEvent:
		return t.delta(int(e.Index), e.Delta)
	case sdk.ContentBlockStopEvent:
		return t.stop(int(e.Index))
	case sdk.MessageDeltaEvent:
		if e.Delta.StopReason != "" {
			t.rawStop = string(e.Delta.StopReason)
		}
		// message_delta usage is cumulative: it replaces, never adds.
		u := e.Usage
		if u.JSON.OutputTokens.Valid() {
			t.usage.OutputTokens = u.OutputTokens
		}
		if u.JSON.InputTokens.Valid() && u.InputTokens > 0 {
			t.usage.InputTokens = u.InputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() && u.CacheReadInputTokens > 0 {
			t.usage.CacheReadTokens = u.CacheReadInputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() && u.CacheCreationInputTokens > 0 {
			t.usage.CacheCreationTokens = u.CacheCreationInputTokens
		}
	case sdk.MessageStopEvent:
		t.done = true
		return t.stopOpen()
	default:
		// Unknown event types are skipped (Anthropic's versioning policy
		// allows new ones).
		t.log.Debug("skipping unknown stream event", "type", ev.Type)
	}
	return nil
}

func (t *translator) start(idx int, cb sdk.ContentBlockStartEventContentBlockUnion) error {
	if idx < 0 {
		return inconsistent("content_block_start for block %d", idx)
	}
	if _, dup := t.blocks[idx]; dup {
		return inconsistent("content_block_start for block %d, which already started", idx)
	}
	switch cb.Type {
	case "text":
		t.blocks[idx] = &block{typ: message.BlockText}
		if cb.Text != "" {
			return t.Send(model.Delta{Kind: model.KindText, Index: idx, Text: cb.Text})
		}
	case "thinking":
		t.blocks[idx] = &block{typ: message.BlockThinking, startSig: cb.Signature}
		if cb.Thinking != "" {
			return t.Send(model.Delta{Kind: model.KindThinking, Index: idx, Text: cb.Thinking})
		}
	case "tool_use":
		b := &block{typ: message.BlockToolUse, id: cb.ID}
		if raw := strings.TrimSpace(cb.JSON.Input.Raw()); raw != "" && raw != "null" && !emptyObject(raw) {
			b.pendingInput = raw
		}
		t.blocks[idx] = b
		return t.Send(model.Delta{Kind: model.KindToolUseStart, Index: idx, ToolUseID: cb.ID, ToolName: cb.Name})
	default:
		// redacted_thinking, server tool blocks: no canonical form.
		t.log.Debug("skipping content block without canonical form", "type", cb.Type, "index", idx)
	}
	return nil
}

func (t *translator) delta(idx int, d sdk.RawContentBlockDeltaUnion) error {
	b := t.blocks[idx]
	switch {
	case idx < 0:
		return inconsistent("%s for block %d", d.Type, idx)
	case b != nil && b.stopped:
		return inconsistent("%s for block %d after its content_block_stop", d.Type, idx)
	}
	switch d.Type {
	case "text_delta":
		if b == nil { // a delta without its start: the text block is implied
			b = &block{typ: message.BlockText}
			t.blocks[idx] = b
		}
		if b.typ != message.BlockText {
			return inconsistent("text_delta for %s block %d", b.typ, idx)
		}
		if d.Text == "" {
			return nil
		}
		return t.Send(model.Delta{Kind: model.KindText, Index: idx, Text: d.Text})
	case "thinking_delta", "signature_delta":
		if b == nil {
			b = &block{typ: message.BlockThinking}
			t.blocks[idx] = b
		}
		if b.typ != message.BlockThinking {
			return inconsistent("%s for %s block %d", d.Type, b.typ, idx)
		}
		if d.Type == "signature_delta" {
			if d.Signature == "" {
				return nil
			}
			// The signature rides on the block's last thinking delta.
			b.sigSent = true
			return t.Send(model.Delta{Kind: model.KindThinking, Index: idx, Signature: d.Signature})
		}
		if d.Thinking == "" {
			return nil
		}
		return t.Send(model.Delta{Kind: model.KindThinking, Index: idx, Text: d.Thinking})
	case "input_json_delta":
		if b == nil || b.typ != message.BlockToolUse {
			return inconsistent("input_json_delta for block %d, which is not a tool_use block", idx)
		}
		if d.PartialJSON == "" {
			return nil
		}
		// Streamed fragments are the whole input: whatever the start
		// carried is dropped, so the fragments reassemble to exactly the
		// provider's input.
		b.streamed, b.pendingInput = true, ""
		b.input.WriteString(d.PartialJSON)
		return t.Send(model.Delta{Kind: model.KindToolInput, Index: idx, Text: d.PartialJSON})
	default:
		// citations_delta and future delta types carry nothing canonical.
		t.log.Debug("skipping content block delta", "type", d.Type, "index", idx)
	}
	return nil
}

func (t *translator) stop(idx int) error {
	b := t.blocks[idx]
	if b == nil || b.stopped {
		return nil // a block without canonical form, or a repeated stop
	}
	b.stopped = true
	switch b.typ {
	case message.BlockThinking:
		if b.startSig != "" && !b.sigSent {
			if err := t.Send(model.Delta{Kind: model.KindThinking, Index: idx, Signature: b.startSig}); err != nil {
				return err
			}
		}
	case message.BlockToolUse:
		if !b.streamed && b.pendingInput != "" {
			b.input.WriteString(b.pendingInput)
			if err := t.Send(model.Delta{Kind: model.KindToolInput, Index: idx, Text: b.pendingInput}); err != nil {
				return err
			}
		}
		if _, err := model.ParseToolInput(b.input.String()); err != nil {
			t.log.Warn("tool input from Anthropic is not a JSON object; the tool will fail with invalid_input",
				"tool_use_id", b.id, "err", err, "bytes", b.input.Len())
		}
	}
	return t.Send(model.Delta{Kind: model.KindBlockStop, Index: idx})
}

// stopOpen stops, in index order, the blocks the stream never stopped:
// the message ended, and a block's stop is what emits a pending input
// or signature and closes a tool_use block's input.
func (t *translator) stopOpen() error {
	var open []int
	for i, b := range t.blocks {
		if !b.stopped {
			open = append(open, i)
		}
	}
	slices.Sort(open)
	for _, i := range open {
		if err := t.stop(i); err != nil {
			return err
		}
	}
	return nil
}

// stopWindowExceeded is the stop_reason of an answer cut short by the
// end of the context window (Stream reports it as context_overflow).
const stopWindowExceeded = "model_context_window_exceeded"

// stopReason maps Anthropic's stop_reason to a canonical one.
func (t *translator) stopReason() string {
	switch t.rawStop {
	case "end_turn", "max_tokens", "stop_sequence", "tool_use":
		return t.rawStop
	case stopWindowExceeded:
		return model.StopMaxTokens
	case "pause_turn", "refusal":
		t.log.Info("Anthropic ended the message early; treating it as end_turn", "stop_reason", t.rawStop)
		return model.StopEndTurn
	}
	t.log.Warn("unknown stop_reason from Anthropic; treating it as end_turn", "stop_reason", t.rawStop)
	return model.StopEndTurn
}

func emptyObject(raw string) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal([]byte(raw), &m) == nil && m != nil && len(m) == 0
}

func inconsistent(format string, args ...any) error {
	return &model.Error{Class: model.ClassProviderError,
		Message: "Anthropic's stream was inconsistent: " + fmt.Sprintf(format, args...)}
}
