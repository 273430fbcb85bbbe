package agent

import (
	"encoding/json"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/protocol"
)

// Payloads of the events the loop emits, typed so the hot path encodes
// without reflection over maps. docs/event-catalog.md lists them.

type routeDecided struct {
	Model         string `json:"model"`
	Reason        string `json:"reason"`
	PolicyVersion string `json:"policy_version"`
}

type callRequest struct {
	Messages      int      `json:"messages"`
	Tools         []string `json:"tools"`
	SystemSHA256  string   `json:"system_sha256"`
	MaxTokens     int      `json:"max_tokens"`
	ContextTokens int      `json:"context_tokens"`
	ContextWindow int      `json:"context_window"`
}

type llmCallStarted struct {
	MessageID string      `json:"message_id"`
	Model     string      `json:"model"`
	CallIndex int         `json:"call_index"`
	Request   callRequest `json:"request"`
}

type llmCallCompleted struct {
	MessageID  string        `json:"message_id"`
	Model      string        `json:"model"`
	StopReason string        `json:"stop_reason"`
	Usage      message.Usage `json:"usage"`
	DurationMS int64         `json:"duration_ms"`
	// The conversation after the call, as the provider counted it.
	ContextTokens int `json:"context_tokens"`
	ContextWindow int `json:"context_window"`
}

type llmCallFailed struct {
	MessageID  string        `json:"message_id"`
	Model      string        `json:"model"`
	ErrorClass string        `json:"error_class"`
	Message    string        `json:"message"`
	Usage      message.Usage `json:"usage"`
	DurationMS int64         `json:"duration_ms"`
}

type messageStart struct {
	MessageID string       `json:"message_id"`
	Role      message.Role `json:"role"`
	Model     string       `json:"model"`
}

type textDelta struct {
	MessageID string `json:"message_id"`
	Index     int    `json:"content_block_index"`
	Text      string `json:"text"`
}

type thinkingDelta struct {
	MessageID string  `json:"message_id"`
	Index     int     `json:"content_block_index"`
	Text      string  `json:"text"`
	Signature *string `json:"signature"`
}

type toolUseStart struct {
	MessageID string `json:"message_id"`
	Index     int    `json:"content_block_index"`
	ToolUseID string `json:"tool_use_id"`
	ToolName  string `json:"tool_name"`
}

type toolUseInputDelta struct {
	MessageID   string `json:"message_id"`
	Index       int    `json:"content_block_index"`
	ToolUseID   string `json:"tool_use_id"`
	PartialJSON string `json:"partial_json"`
}

type toolUseEnd struct {
	MessageID  string          `json:"message_id"`
	Index      int             `json:"content_block_index"`
	ToolUseID  string          `json:"tool_use_id"`
	FinalInput json.RawMessage `json:"final_input"`
}

type messageComplete struct {
	MessageID    string          `json:"message_id"`
	StopReason   string          `json:"stop_reason"`
	FinalContent []message.Block `json:"final_content"`
	Usage        message.Usage   `json:"usage"`
}

type toolCalled struct {
	ToolUseID string          `json:"tool_use_id"`
	ToolName  string          `json:"tool_name"`
	MessageID string          `json:"message_id"`
	Input     json.RawMessage `json:"input"`
}

type toolCompleted struct {
	ToolUseID  string `json:"tool_use_id"`
	ToolName   string `json:"tool_name"`
	Summary    string `json:"summary"`
	Result     string `json:"result"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	// Via: which path served a file tool while an editor was attached
	// to the session (tool.Result.Via).
	Via string `json:"via,omitempty"`
	// ExitCode: a shell command's (tool.Result.ExitCode).
	ExitCode *int `json:"exit_code,omitempty"`
	toolOutput
	fileChange
}

type toolFailed struct {
	ToolUseID  string `json:"tool_use_id"`
	ToolName   string `json:"tool_name"`
	ErrorClass string `json:"error_class"`
	Message    string `json:"message"`
	Started    bool   `json:"started"`
	DurationMS int64  `json:"duration_ms"`
}

type turnCompleted struct {
	Outcome    string        `json:"outcome"` // "completed" or "failed"
	StopReason string        `json:"stop_reason,omitempty"`
	ErrorClass string        `json:"error_class,omitempty"`
	Usage      message.Usage `json:"usage"`
	Calls      int           `json:"llm_calls"`
	DurationMS int64         `json:"duration_ms"`
	// Budget is the limit the turn stopped at.
	Budget *protocol.TurnBudget `json:"budget,omitempty"`
}

type turnCancelled struct {
	Reason           string        `json:"reason"`
	Phase            string        `json:"phase"` // "llm", "tools", "seam", "between_calls"
	PartialMessageID string        `json:"partial_message_id,omitempty"`
	CancelledTools   []string      `json:"cancelled_tool_use_ids"`
	Usage            message.Usage `json:"usage"`
	DurationMS       int64         `json:"duration_ms"`
}

// resultPreviewBytes bounds the tool result copied into tool.completed;
// the full result is in the tool call row and the tool results message.
const resultPreviewBytes = 2048
