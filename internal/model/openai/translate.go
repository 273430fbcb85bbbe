package openai

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// translator turns the chunks of one streamed call into canonical
// deltas. It keeps its own state rather than the SDK's accumulator,
// which drops chunks whose id differs from the first.
//
// Content block indexes are handed out in order of first appearance: a
// text (or thinking) block takes the next free index when its first
// fragment arrives, and a tool call takes one when it starts. With the
// usual order (text, then tool calls) that is text at 0 and the calls
// after it. Every block stays open until finish_reason arrives, or the
// stream ends without one; then each gets a KindBlockStop, in index
// order. Text or reasoning after finish_reason (from servers that send
// it) goes to new blocks, stopped at the next finish_reason or at the
// end; tool calls after it are ignored.
type translator struct {
	model.DeltaSink
	log *slog.Logger

	sawChunk bool
	next     int   // next free content block index
	text     int   // the open text block, or -1
	thinking int   // the open thinking block, or -1
	open     []int // open blocks, ascending

	calls   map[int64]*toolCall // by the stream's tool-call index
	order   []*toolCall         // in order of first appearance
	last    *toolCall           // the call the last fragment went to
	started int                 // tool calls started

	finishReason string
	closed       bool // the blocks were closed (finish_reason seen)
	usage        message.Usage
}

// toolCall is one tool call of the stream.
type toolCall struct {
	block   int // content block index once started, else -1
	id      string
	name    string
	pending strings.Builder // arguments that arrived before the name
	done    bool            // closed, or dropped
}

func newTranslator(ctx context.Context, emit func(model.Delta) error, log *slog.Logger) *translator {
	return &translator{DeltaSink: model.DeltaSink{Ctx: ctx, Emit: emit}, log: log, text: -1, thinking: -1, calls: map[int64]*toolCall{}}
}

func (t *translator) openBlock() int {
	i := t.next
	t.next++
	t.open = append(t.open, i)
	return i
}

// chunk translates one chat.completion.chunk. Only choice 0 is read (the
// request asks for one).
func (t *translator) chunk(c *chunk) error {
	t.sawChunk = true
	if c.Usage != nil {
		t.setUsage(*c.Usage)
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		if err := t.delta(&ch.Delta); err != nil {
			return err
		}
		if ch.FinishReason != "" {
			t.finishReason = ch.FinishReason
			if err := t.closeAll(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *translator) delta(d *sdk.ChatCompletionChunkChoiceDelta) error {
	if r := reasoning(d); r != "" {
		if t.thinking < 0 {
			t.thinking = t.openBlock()
		}
		if err := t.Send(model.Delta{Kind: model.KindThinking, Index: t.thinking, Text: r}); err != nil {
			return err
		}
	}
	// A refusal is the model's answer too: it is shown as text.
	for _, s := range []string{d.Content, d.Refusal} {
		if s == "" {
			continue
		}
		if t.text < 0 {
			t.text = t.openBlock()
		}
		if err := t.Send(model.Delta{Kind: model.KindText, Index: t.text, Text: s}); err != nil {
			return err
		}
	}
	for i := range d.ToolCalls {
		if err := t.toolCall(&d.ToolCalls[i]); err != nil {
			return err
		}
	}
	return nil
}

// reasoning returns the reasoning text some compatible servers stream
// beside the content: reasoning_content (vLLM, DeepSeek, llama.cpp) or
// reasoning (Ollama, OpenRouter, newer vLLM).
func reasoning(d *sdk.ChatCompletionChunkChoiceDelta) string {
	for _, k := range []string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// toolCall handles one delta.tool_calls entry. The first entry of an
// index normally carries id and function.name, later ones argument
// fragments; servers also send all of it in one entry, repeat the id on
// every entry, omit the index (calls are then told apart by id), or
// reuse an index for a new call (a different id with a name).
func (t *translator) toolCall(tc *sdk.ChatCompletionChunkChoiceDeltaToolCall) error {
	args := tc.Function.Arguments
	if f := tc.Function.JSON.Arguments; !f.Valid() && strings.HasPrefix(strings.TrimSpace(f.Raw()), "{") {
		args = f.Raw() // arguments sent as an object, not a string
	}
	var call *toolCall
	key, indexed := tc.Index, tc.JSON.Index.Valid()
	if indexed {
		call = t.calls[key]
		if call != nil && tc.ID != "" && call.id != "" && tc.ID != call.id && tc.Function.Name != "" {
			call = nil // the index was reused for a new call
		}
	} else {
		key = -int64(len(t.order)) - 1 // never a real index
		switch {
		case tc.ID != "":
			for _, c := range t.order {
				if c.id == tc.ID {
					call = c
				}
			}
		default:
			call = t.last
		}
	}
	if call == nil {
		call = &toolCall{block: -1}
		t.order = append(t.order, call)
		t.calls[key] = call
		if t.closed {
			call.done = true
		}
	}
	t.last = call
	if call.done {
		if args != "" || tc.Function.Name != "" {
			t.log.Warn("openai stream: tool call fragment after finish_reason ignored", "index", tc.Index, "id", tc.ID)
		}
		return nil
	}
	if call.id == "" {
		call.id = tc.ID
	}
	if call.name == "" {
		call.name = tc.Function.Name
	}
	if call.block < 0 {
		if call.name == "" {
			call.pending.WriteString(args)
			return nil
		}
		if call.id == "" {
			// A server that sends no ids: the id has to match the tool
			// result sent back, and to differ from every other call's,
			// of this message and of every other turn.
			call.id = fallbackID()
		}
		call.block = t.openBlock()
		t.started++
		if err := t.Send(model.Delta{Kind: model.KindToolUseStart, Index: call.block, ToolUseID: call.id, ToolName: call.name}); err != nil {
			return err
		}
		args = call.pending.String() + args
		call.pending.Reset()
	}
	if args == "" {
		return nil
	}
	return t.Send(model.Delta{Kind: model.KindToolInput, Index: call.block, Text: args})
}

// closeAll ends every open block, in index order. The first call also
// ends the tool calls; text or reasoning that arrives after it opens new
// blocks, which the next call ends.
func (t *translator) closeAll() error {
	if !t.closed {
		t.closed = true
		for i, c := range t.order {
			if c.block < 0 && !c.done {
				// A call that never got a function name still starts,
				// nameless, so that it fails visibly (the agent answers
				// it with an error the model reads) instead of vanishing.
				if err := t.startNameless(c, i); err != nil {
					return err
				}
			}
			c.done = true
		}
	}
	open := t.open
	t.open, t.text, t.thinking = nil, -1, -1
	for _, i := range open {
		if err := t.Send(model.Delta{Kind: model.KindBlockStop, Index: i}); err != nil {
			return err
		}
	}
	return nil
}

// startNameless starts a tool call that has no function name, with its
// arguments so far; i is its place in t.order.
func (t *translator) startNameless(c *toolCall, i int) error {
	t.log.Warn("openai stream: tool call without a function name", "id", c.id)
	if c.id == "" {
		c.id = fallbackID() // as toolCall names id-less calls
	}
	c.block = t.openBlock()
	t.started++
	if err := t.Send(model.Delta{Kind: model.KindToolUseStart, Index: c.block, ToolUseID: c.id}); err != nil {
		return err
	}
	args := c.pending.String()
	c.pending.Reset()
	if args == "" {
		return nil
	}
	return t.Send(model.Delta{Kind: model.KindToolInput, Index: c.block, Text: args})
}

// finish closes the blocks of a stream that ended cleanly.
func (t *translator) finish() error {
	switch t.finishReason {
	case "":
		t.log.Warn("openai stream ended without a finish_reason; taking it as complete")
	case "content_filter":
		t.log.Warn("openai stream: the provider's content filter ended the answer")
	}
	return t.closeAll()
}

// result is the stop reason and usage so far. finish_reason maps as
// stop→end_turn, length→max_tokens, tool_calls (or the deprecated
// function_call)→tool_use. Any call that started tool calls reports
// tool_use unless it ran out of tokens, as some local servers say "stop"
// after tool calls. content_filter maps to end_turn: the partial answer
// is a valid message, the canonical stop reasons have no filter value,
// and a warning is logged. Anything else, or none, is end_turn.
func (t *translator) result() model.Result {
	stop := model.StopEndTurn
	switch {
	case t.finishReason == "length":
		stop = model.StopMaxTokens
	case t.finishReason == "content_filter":
	case t.started > 0:
		stop = model.StopToolUse
	}
	return model.Result{StopReason: stop, Usage: t.usage}
}

// setUsage records a usage object; the last one wins (servers that send
// usage on every chunk send running totals). OpenAI's prompt_tokens
// includes the cached tokens, which metis counts and prices apart, so
// InputTokens is the uncached rest.
func (t *translator) setUsage(u sdk.CompletionUsage) {
	if u.PromptTokens == 0 && u.CompletionTokens == 0 && (t.usage.InputTokens != 0 || t.usage.OutputTokens != 0) {
		return
	}
	cached := min(max(u.PromptTokensDetails.CachedTokens, 0), max(u.PromptTokens, 0))
	t.usage = message.Usage{
		InputTokens:     max(u.PromptTokens-cached, 0),
		OutputTokens:    max(u.CompletionTokens, 0),
		CacheReadTokens: cached,
	}
}
