package model

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/metis-agent/metis/internal/message"
)

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one model call.
type Request struct {
	Model     string            // full model id, "provider:model"
	System    string            // system prompt
	Messages  []message.Message // conversation so far, oldest first
	Tools     []ToolSpec
	MaxTokens int
	// ThinkingBudget asks models that can think before answering to do
	// so with at most this many tokens (0: no extended thinking).
	// Adapters whose provider has no such setting ignore it.
	ThinkingBudget int
	// PromptCache asks adapters whose provider caches prompt prefixes on
	// request (Anthropic) to mark the cacheable prefix; others ignore it.
	PromptCache bool
	// Task is "" for a turn's call, TaskSummary for a compaction's
	// summary call. Providers ignore it; the offline demo answers a
	// summary request with a summary.
	Task string
}

// DeltaKind tells what a Delta carries.
type DeltaKind uint8

// Delta kinds.
const (
	// KindText appends Text to the text block at Index.
	KindText DeltaKind = iota + 1
	// KindThinking appends Text to the thinking block at Index; the
	// block's last thinking delta carries its Signature.
	KindThinking
	// KindToolUseStart opens a tool_use block (ToolUseID, ToolName).
	KindToolUseStart
	// KindToolInput appends a raw JSON fragment (Text) to a tool_use
	// block's input.
	KindToolInput
	// KindBlockStop closes the block at Index.
	KindBlockStop
)

// Delta is one canonical streaming step of a model call.
type Delta struct {
	Kind      DeltaKind
	Index     int    // content block index within the message
	Text      string // text, thinking text, or partial JSON
	Signature string // thinking signature (final thinking delta only)
	ToolUseID string // tool use start
	ToolName  string // tool use start
}

// Result is how a model call ended.
type Result struct {
	StopReason string        // end_turn, max_tokens, stop_sequence, tool_use
	Usage      message.Usage // tokens; CostUSD is filled in by the caller
}

// Stop reasons.
const (
	StopEndTurn      = "end_turn"
	StopMaxTokens    = "max_tokens"
	StopSequence     = "stop_sequence"
	StopToolUse      = "tool_use"
	StopCancelled    = "cancelled"
	StopErrorPartial = "error"
)

// Adapter runs model calls for one provider.
type Adapter interface {
	// Stream performs one streamed call. It calls emit for every delta,
	// in order, from the calling goroutine, and returns when the stream
	// ends. If emit returns an error, Stream stops and returns it. When
	// ctx is cancelled Stream aborts the provider request at once and
	// returns an error wrapping ctx's error; deltas already emitted stay
	// valid. Failures are returned as *Error where the class is known.
	Stream(ctx context.Context, req Request, emit func(Delta) error) (Result, error)
}

// SplitID splits "provider:model".
func SplitID(id string) (provider, name string, err error) {
	p, n, ok := strings.Cut(id, ":")
	if !ok || p == "" || n == "" {
		return "", "", fmt.Errorf("model id %q: want provider:model", id)
	}
	return p, n, nil
}
