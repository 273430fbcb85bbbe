package protocol

import "encoding/json"

// Long sessions (docs/context.md): the compaction of a conversation
// that nears its model's context window, and the budgets a turn runs
// under.

// BlockCompaction is the content block of a compaction message: the
// marker, in the stored conversation, where the model's view was
// compacted (docs/message-format.md).
const BlockCompaction = "compaction"

// Catalog events of compaction.
const (
	// EventContextCompacting: a compaction starts (summarising takes
	// seconds).
	EventContextCompacting EventType = "context.compacting"
	// EventContextCompacted: a compaction ended; its compaction message
	// is committed with it (contract §9).
	EventContextCompacted EventType = "context.compacted"
	// EventContextCompactionFailed: a compaction ended without changing
	// anything (cancelled, nothing left to compact).
	EventContextCompactionFailed EventType = "context.compaction_failed"
	// EventSessionBudgetChanged: PATCH /sessions/{id} changed the
	// session's cost limits (payload SessionBudgetPatch: the fields
	// changed).
	EventSessionBudgetChanged EventType = "session.budget_changed"
)

// Compaction triggers (the trigger field of the context.* payloads).
const (
	// CompactAuto: the next model call would have passed the window
	// minus the reserve.
	CompactAuto = "auto"
	// CompactOverflow: the provider refused a call as too long for its
	// context window; the call is retried once after the compaction.
	CompactOverflow = "overflow"
	// CompactManual: POST /sessions/{id}/compact.
	CompactManual = "manual"
)

// Compaction methods (context.compacted's method).
const (
	// CompactStub: old tool results were replaced by one-line stubs.
	CompactStub = "stub"
	// CompactSummary: the older part of the conversation was summarised
	// by a model (old tool results stubbed too).
	CompactSummary = "summary"
	// CompactDrop: summarising failed; the older part was dropped from
	// the model's view without a summary (the error says why).
	CompactDrop = "drop"
)

// Error classes of context.compaction_failed and of a turn that cannot
// fit its model's window.
const (
	// ClassContextOverflow: the conversation does not fit the model's
	// context window (the provider said so, or metis could not compact it
	// below the window). Also an llm.call_failed error_class.
	ClassContextOverflow = "context_overflow"
	// ClassNoProgress: nothing in the conversation could be compacted
	// further (the recent turns that are always kept fill the window).
	ClassNoProgress = "no_progress"
	// ClassBudgetExceeded is turn.completed's error_class when the next
	// model call would have passed the turn's or the session's cost
	// limit; the payload's budget says which.
	ClassBudgetExceeded = "budget_exceeded"
)

// Budget kinds (turn.completed's budget.kind).
const (
	BudgetCalls       = "calls"        // max-calls: model calls per turn (error_class max_llm_calls)
	BudgetTurnCost    = "turn_cost"    // max-turn-cost, USD
	BudgetSessionCost = "session_cost" // max-session-cost, USD
)

// TurnPhaseCompaction is turn.cancelled's phase for a turn cancelled
// while it compacted its conversation.
const TurnPhaseCompaction = "compaction"

// ContextCompactingPayload is the payload of EventContextCompacting.
type ContextCompactingPayload struct {
	Trigger string `json:"trigger"`
	// CompactionID names a manual compaction (the answer of POST
	// /sessions/{id}/compact); omitted inside a turn.
	CompactionID string `json:"compaction_id,omitempty"`
	TokensBefore int64  `json:"tokens_before"`
	// ContextWindow is the window compacted for (0 when unknown).
	ContextWindow int64  `json:"context_window"`
	Model         string `json:"model,omitempty"` // the model that summarises
}

// ContextCompactedPayload is the payload of EventContextCompacted.
type ContextCompactedPayload struct {
	TokensBefore int64  `json:"tokens_before"`
	TokensAfter  int64  `json:"tokens_after"`
	Trigger      string `json:"trigger"`
	Method       string `json:"method"`
	CompactionID string `json:"compaction_id,omitempty"`
	// MessageID is the compaction message committed with the event;
	// Message is that message (canonical format), so that a live client
	// can place the marker without fetching it.
	MessageID string          `json:"message_id"`
	Message   json.RawMessage `json:"message"`
	// MessagesCompacted counts the messages the summary replaced (method
	// summary or drop); MessagesStubbed those whose tool results became
	// stubs.
	MessagesCompacted int    `json:"messages_compacted"`
	MessagesStubbed   int    `json:"messages_stubbed"`
	Model             string `json:"model,omitempty"`
	// Usage is the summarising call's (priced; counted in the session's
	// cost); omitted when no model was called.
	Usage      json.RawMessage `json:"usage,omitempty"`
	DurationMS int64           `json:"duration_ms,omitempty"`
	// Error says why summarising failed when Method is drop.
	Error string `json:"error,omitempty"`
}

// ContextCompactionFailedPayload is the payload of
// EventContextCompactionFailed.
type ContextCompactionFailedPayload struct {
	Trigger      string          `json:"trigger"`
	CompactionID string          `json:"compaction_id,omitempty"`
	ErrorClass   string          `json:"error_class"`
	Message      string          `json:"message"`
	Usage        json.RawMessage `json:"usage,omitempty"`
	DurationMS   int64           `json:"duration_ms,omitempty"`
}

// TurnBudget is turn.completed's budget: the limit a turn stopped at
// (error_class budget_exceeded or max_llm_calls).
type TurnBudget struct {
	Kind string `json:"kind"` // BudgetCalls, BudgetTurnCost or BudgetSessionCost
	// Limit is the limit (calls, or USD); Spent what was used when the
	// turn stopped; Next, for cost limits, the estimated cost of the call
	// that would have passed it.
	Limit float64 `json:"limit"`
	Spent float64 `json:"spent"`
	Next  float64 `json:"next,omitempty"`
}

// CompactRequest is the body of POST /sessions/{id}/compact (optional).
type CompactRequest struct {
	// Instructions say what the summary must keep ("the API design
	// decisions", "the failing test names"); at most 4,000 bytes.
	Instructions string `json:"instructions,omitempty"`
}

// CompactAccepted is the answer (202) of POST /sessions/{id}/compact.
type CompactAccepted struct {
	CompactionID string `json:"compaction_id"`
}

// SessionBudgetPatch is the part of PATCH /sessions/{id}'s body that
// sets a session's cost limits, in USD; 0 removes a limit, an absent
// field leaves it.
type SessionBudgetPatch struct {
	MaxTurnCostUSD    *float64 `json:"max_turn_cost_usd,omitempty"`
	MaxSessionCostUSD *float64 `json:"max_session_cost_usd,omitempty"`
}

// SystemPrompt is the answer of GET /sessions/{id}/system-prompt: the
// system prompt the session's next model call sends, as assembled now.
type SystemPrompt struct {
	SessionID string `json:"session_id"`
	Text      string `json:"text"`
	// SHA256 is the hex digest of Text; llm.call_started's
	// request.system_sha256 names the prompt each call sent.
	SHA256 string `json:"sha256"`
	// Sources are the instruction files read into it, in order.
	Sources []PromptSource `json:"sources"`
}

// PromptSource is one instruction file of a system prompt.
type PromptSource struct {
	// Path is "AGENTS.md" (or "CLAUDE.md") for the workspace's, an
	// absolute path for the home's.
	Path  string `json:"path"`
	Scope string `json:"scope"` // "workspace" or "home"
	Bytes int    `json:"bytes"` // bytes included
	// Truncated reports a file cut at the size limit.
	Truncated bool `json:"truncated,omitempty"`
}
