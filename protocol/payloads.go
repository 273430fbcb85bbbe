package protocol

import "encoding/json"

// The payloads of the event catalog, one struct per event type, as
// docs/event-catalog.md documents them. Optional fields carry
// omitempty. Fields holding canonical messages, blocks, usage or tool
// input are raw JSON here (their shape is in docs/message-format.md), so
// that this package needs nothing but the standard library. The
// recorded conformance traces are checked against these structs: every
// field the server sends is declared, every required one is sent.

// SessionCreatedPayload is the payload of EventSessionCreated.
type SessionCreatedPayload struct {
	WorkspacePath   string  `json:"workspace_path"`
	Model           string  `json:"model"`
	ParentSessionID *string `json:"parent_session_id,omitempty"`
	// ForkedFrom is where a fork came from, and Messages how many
	// messages it copied (POST /sessions/{id}/fork).
	ForkedFrom *ForkedFrom `json:"forked_from,omitempty"`
	Messages   int         `json:"messages,omitempty"`
	// Mode is the session's permission mode at creation.
	Mode string `json:"mode,omitempty"`
}

// TurnStartedPayload is the payload of EventTurnStarted.
type TurnStartedPayload struct {
	UserMessage json.RawMessage `json:"user_message"`
}

// TurnCompletedPayload is the payload of EventTurnCompleted.
type TurnCompletedPayload struct {
	Outcome    string          `json:"outcome"`
	StopReason string          `json:"stop_reason,omitempty"`
	ErrorClass string          `json:"error_class,omitempty"`
	Usage      json.RawMessage `json:"usage,omitempty"`
	LLMCalls   int             `json:"llm_calls,omitempty"`
	DurationMS int64           `json:"duration_ms,omitempty"`
	// Budget names the limit a turn stopped at (error_class
	// budget_exceeded or max_llm_calls).
	Budget *TurnBudget `json:"budget,omitempty"`
}

// TurnCancelledPayload is the payload of EventTurnCancelled.
type TurnCancelledPayload struct {
	Reason              string          `json:"reason"`
	Phase               string          `json:"phase,omitempty"`
	PartialMessageID    string          `json:"partial_message_id,omitempty"`
	CancelledToolUseIDs []string        `json:"cancelled_tool_use_ids,omitempty"`
	Usage               json.RawMessage `json:"usage,omitempty"`
	DurationMS          int64           `json:"duration_ms,omitempty"`
}

// RouteDecidedPayload is the payload of EventRouteDecided.
type RouteDecidedPayload struct {
	Model         string `json:"model"`
	Reason        string `json:"reason"`
	PolicyVersion string `json:"policy_version"`
}

// RoutingPolicyReloadedPayload is the payload of EventRoutingPolicyReloaded.
type RoutingPolicyReloadedPayload struct {
	PolicyVersion string `json:"policy_version"`
	Path          string `json:"path,omitempty"`
}

// LLMCallStartedPayload is the payload of EventLLMCallStarted. Request
// describes what was sent: messages (how many), tools (their names),
// and for long sessions system_sha256 (the system prompt's digest: GET
// /sessions/{id}/system-prompt shows the text), max_tokens,
// context_tokens (the request's size, estimated) and context_window.
type LLMCallStartedPayload struct {
	MessageID string          `json:"message_id"`
	Model     string          `json:"model"`
	CallIndex int             `json:"call_index"`
	Request   json.RawMessage `json:"request,omitempty"`
}

// LLMCallCompletedPayload is the payload of EventLLMCallCompleted.
type LLMCallCompletedPayload struct {
	MessageID  string          `json:"message_id"`
	Model      string          `json:"model"`
	StopReason string          `json:"stop_reason"`
	Usage      json.RawMessage `json:"usage"`
	DurationMS int64           `json:"duration_ms,omitempty"`
	// ContextTokens is the size of the conversation after the call as
	// the provider counted it (input, cache and output tokens);
	// ContextWindow the model's window (0 when unknown).
	ContextTokens int64 `json:"context_tokens,omitempty"`
	ContextWindow int64 `json:"context_window,omitempty"`
}

// LLMCallFailedPayload is the payload of EventLLMCallFailed.
type LLMCallFailedPayload struct {
	MessageID  string          `json:"message_id"`
	Model      string          `json:"model"`
	ErrorClass string          `json:"error_class"`
	Message    string          `json:"message"`
	Usage      json.RawMessage `json:"usage,omitempty"`
	DurationMS int64           `json:"duration_ms,omitempty"`
}

// ToolCalledPayload is the payload of EventToolCalled.
type ToolCalledPayload struct {
	ToolUseID string          `json:"tool_use_id"`
	ToolName  string          `json:"tool_name"`
	MessageID string          `json:"message_id,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// ToolCompletedPayload is the payload of EventToolCompleted.
type ToolCompletedPayload struct {
	ToolUseID  string `json:"tool_use_id"`
	ToolName   string `json:"tool_name"`
	Summary    string `json:"summary"`
	Result     string `json:"result"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	// Paths are the files a tool that changes files (write_file,
	// edit_file, apply_patch) added, changed, deleted or moved
	// (workspace-relative, slash-separated; a move names both), and Diff
	// their unified diff ("--- a/path", "+++ b/path", "@@" hunks; at most
	// 64 KiB). DiffTruncated says the diff was cut; it then ends with a
	// line saying so. All three are absent for other tools.
	Paths         []string `json:"paths,omitempty"`
	Diff          string   `json:"diff,omitempty"`
	DiffTruncated bool     `json:"diff_truncated,omitempty"`
	// StructuredContent is an MCP tool's structuredContent, when it
	// encodes to at most 64 KiB; StructuredContentBytes is its size
	// either way.
	StructuredContent      json.RawMessage `json:"structured_content,omitempty"`
	StructuredContentBytes int             `json:"structured_content_bytes,omitempty"`
	// Images are the images an MCP tool returned (not sent to the model
	// yet: the result describes them).
	Images []ToolImage `json:"images,omitempty"`
	// Via says which path served a file tool (read_file, write_file,
	// edit_file) while a client had attached an editor to the session
	// (POST /sessions/{id}/editor): "editor" (the editor's buffer was
	// read or written) or "disk" (the editor could not serve it; the
	// summary says why). Absent when no editor offered it: the disk.
	Via string `json:"via,omitempty"`
	// ExitCode is a shell command's exit code (shell only, absent for a
	// command started in the background).
	ExitCode *int `json:"exit_code,omitempty"`
}

// ToolImage is an image a tool returned: its media type, its size in
// bytes, and its data (base64) while the call's images together stay
// within 256 KiB.
type ToolImage struct {
	MediaType string `json:"media_type"`
	Bytes     int    `json:"bytes"`
	Data      []byte `json:"data,omitempty"`
}

// ToolFailedPayload is the payload of EventToolFailed.
type ToolFailedPayload struct {
	ToolUseID  string `json:"tool_use_id"`
	ToolName   string `json:"tool_name"`
	ErrorClass string `json:"error_class"`
	Message    string `json:"message"`
	Started    bool   `json:"started,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
}

// DelegateStartedPayload is the payload of EventDelegateStarted.
type DelegateStartedPayload struct {
	WorkerSessionID string `json:"worker_session_id"`
	Task            string `json:"task"`
	Model           string `json:"model"`
	Depth           int    `json:"depth,omitempty"`
}

// DelegateCompletedPayload is the payload of EventDelegateCompleted.
type DelegateCompletedPayload struct {
	WorkerSessionID string  `json:"worker_session_id"`
	Success         bool    `json:"success"`
	Summary         string  `json:"summary"`
	CostUSD         float64 `json:"cost_usd"`
}

// DelegateFailedPayload is the payload of EventDelegateFailed.
type DelegateFailedPayload struct {
	WorkerSessionID string  `json:"worker_session_id"`
	FailureMode     string  `json:"failure_mode"`
	Message         string  `json:"message,omitempty"`
	CostUSD         float64 `json:"cost_usd,omitempty"`
}

// FeedbackSubmittedPayload is the payload of EventFeedbackSubmitted.
type FeedbackSubmittedPayload struct {
	Rating  string `json:"rating"`
	Comment string `json:"comment,omitempty"`
}

// ApprovalRequestedPayload is the payload of EventApprovalRequested: a
// tool call waits for a user's answer (POST
// /sessions/{id}/approvals/{approval_id}). The first four fields are
// pinned (contract §7).
type ApprovalRequestedPayload struct {
	ApprovalID string          `json:"approval_id"`
	ToolUseID  string          `json:"tool_use_id"`
	ToolName   string          `json:"tool_name"`
	Input      json.RawMessage `json:"input"`
	MessageID  string          `json:"message_id,omitempty"`
	// Kind is what the tool does (read, edit, execute, fetch, delegate,
	// external); Targets what its rules match on (the command line, the
	// paths, the URL).
	Kind    string   `json:"kind,omitempty"`
	Targets []string `json:"targets,omitempty"`
	// Reason says why the call asks; Rule is the rule that made it
	// ask, with its action ("ask: shell(git push *)"), when one did.
	Reason string `json:"reason,omitempty"`
	Rule   string `json:"rule,omitempty"`
	// Mode is the session's mode when it asked.
	Mode string `json:"mode,omitempty"`
	// SessionRules are what an allow with scope session adds.
	SessionRules []string `json:"session_rules,omitempty"`
	// ExpiresAt is when the request is denied with reason timeout.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// ApprovalResolvedPayload is the payload of EventApprovalResolved. The
// first four fields are pinned (contract §7).
type ApprovalResolvedPayload struct {
	ApprovalID string `json:"approval_id"`
	ToolUseID  string `json:"tool_use_id"`
	Decision   string `json:"decision"` // DecisionAllow or DecisionDeny
	Reason     string `json:"reason"`   // ApprovalReasonUser, …Timeout or …Cancelled
	ToolName   string `json:"tool_name,omitempty"`
	Scope      string `json:"scope,omitempty"`   // the answer's scope (reason user)
	Message    string `json:"message,omitempty"` // the user's text
	// SessionRules are the rules an allow with scope session added.
	SessionRules []string `json:"session_rules,omitempty"`
	// ReleasedBy is the approval whose session rule covered this one.
	ReleasedBy string `json:"released_by,omitempty"`
}

// SessionModeChangedPayload is the payload of EventSessionModeChanged.
type SessionModeChangedPayload struct {
	Mode         string `json:"mode"`
	PreviousMode string `json:"previous_mode"`
	// Planner is set when the change followed the planner's (a worker
	// whose turn was running when its planner's mode changed).
	Planner string `json:"planner_session_id,omitempty"`
}

// BusHandlerWarningPayload is the payload of EventBusHandlerWarning. It
// may carry further fields, particular to the warning's reason.
type BusHandlerWarningPayload struct {
	SubscriptionName string `json:"subscription_name,omitempty"`
	Reason           string `json:"reason"`
}

// BusSubscriberRegisteredPayload is the payload of EventBusSubscriberRegistered.
type BusSubscriberRegisteredPayload struct {
	SubscriptionName string `json:"subscription_name"`
}

// BusSubscriberUnregisteredPayload is the payload of EventBusSubscriberUnregistered.
type BusSubscriberUnregisteredPayload struct {
	SubscriptionName string `json:"subscription_name"`
}

// MessageStartPayload is the payload of EventMessageStart.
type MessageStartPayload struct {
	MessageID string `json:"message_id"`
	Role      Role   `json:"role"`
	Model     string `json:"model"`
}

// TextDeltaPayload is the payload of EventTextDelta.
type TextDeltaPayload struct {
	MessageID         string `json:"message_id"`
	ContentBlockIndex int    `json:"content_block_index"`
	Text              string `json:"text"`
}

// ThinkingDeltaPayload is the payload of EventThinkingDelta.
type ThinkingDeltaPayload struct {
	MessageID         string  `json:"message_id"`
	ContentBlockIndex int     `json:"content_block_index"`
	Text              string  `json:"text"`
	Signature         *string `json:"signature"`
}

// ToolUseStartPayload is the payload of EventToolUseStart.
type ToolUseStartPayload struct {
	MessageID         string `json:"message_id"`
	ContentBlockIndex int    `json:"content_block_index"`
	ToolUseID         string `json:"tool_use_id"`
	ToolName          string `json:"tool_name"`
}

// ToolUseInputDeltaPayload is the payload of EventToolUseInputDelta.
type ToolUseInputDeltaPayload struct {
	MessageID         string `json:"message_id"`
	ContentBlockIndex int    `json:"content_block_index"`
	ToolUseID         string `json:"tool_use_id"`
	PartialJSON       string `json:"partial_json"`
}

// ToolUseEndPayload is the payload of EventToolUseEnd.
type ToolUseEndPayload struct {
	MessageID         string          `json:"message_id"`
	ContentBlockIndex int             `json:"content_block_index"`
	ToolUseID         string          `json:"tool_use_id"`
	FinalInput        json.RawMessage `json:"final_input"`
}

// MessageCompletePayload is the payload of EventMessageComplete.
type MessageCompletePayload struct {
	MessageID    string          `json:"message_id"`
	StopReason   string          `json:"stop_reason"`
	FinalContent json.RawMessage `json:"final_content"`
	Usage        json.RawMessage `json:"usage,omitempty"`
}

// Streams of EventToolOutputDelta.
const (
	OutputStdout = "stdout"
	OutputStderr = "stderr"
)

// ToolOutputDeltaPayload is the payload of EventToolOutputDelta: what a
// running shell call printed since its previous delta, in order.
type ToolOutputDeltaPayload struct {
	// MessageID is the assistant message that holds the call.
	MessageID string `json:"message_id"`
	ToolUseID string `json:"tool_use_id"`
	// Stream is OutputStdout or OutputStderr.
	Stream string `json:"stream"`
	// Data is the new output, UTF-8 (bytes that are not valid UTF-8 are
	// replaced by U+FFFD; a character split across writes is held until
	// it is whole).
	Data string `json:"data"`
	// Offset is how many bytes of data the call's earlier deltas carried,
	// both streams together: a client that sees a first offset above 0
	// missed the start.
	Offset int64 `json:"offset"`
	// Capped marks the call's last delta when its live output reached
	// the cap: nothing more is streamed for the call (data is empty), the
	// command runs on and its result is unchanged.
	Capped bool `json:"capped,omitempty"`
}

// NewPayload returns a pointer to a new, zero payload struct of event
// type t, to decode a payload into, or nil for a type the catalog does
// not know.
func NewPayload(t EventType) any {
	switch t {
	case EventSessionCreated:
		return new(SessionCreatedPayload)
	case EventTurnStarted:
		return new(TurnStartedPayload)
	case EventTurnCompleted:
		return new(TurnCompletedPayload)
	case EventTurnCancelled:
		return new(TurnCancelledPayload)
	case EventTurnQueued:
		return new(TurnQueuedPayload)
	case EventTurnSteered:
		return new(TurnSteeredPayload)
	case EventRouteDecided:
		return new(RouteDecidedPayload)
	case EventRoutingPolicyReloaded:
		return new(RoutingPolicyReloadedPayload)
	case EventLLMCallStarted:
		return new(LLMCallStartedPayload)
	case EventLLMCallCompleted:
		return new(LLMCallCompletedPayload)
	case EventLLMCallFailed:
		return new(LLMCallFailedPayload)
	case EventToolCalled:
		return new(ToolCalledPayload)
	case EventToolCompleted:
		return new(ToolCompletedPayload)
	case EventToolFailed:
		return new(ToolFailedPayload)
	case EventToolBackgroundStarted:
		return new(ToolBackgroundStartedPayload)
	case EventToolBackgroundExited:
		return new(ToolBackgroundExitedPayload)
	case EventDelegateStarted:
		return new(DelegateStartedPayload)
	case EventDelegateCompleted:
		return new(DelegateCompletedPayload)
	case EventDelegateFailed:
		return new(DelegateFailedPayload)
	case EventFeedbackSubmitted:
		return new(FeedbackSubmittedPayload)
	case EventContextCompacting:
		return new(ContextCompactingPayload)
	case EventContextCompacted:
		return new(ContextCompactedPayload)
	case EventContextCompactionFailed:
		return new(ContextCompactionFailedPayload)
	case EventSessionBudgetChanged:
		return new(SessionBudgetPatch)
	case EventWorkspaceCheckpointed:
		return new(WorkspaceCheckpointedPayload)
	case EventWorkspaceCheckpointFailed:
		return new(WorkspaceCheckpointFailedPayload)
	case EventWorkspaceChanged:
		return new(WorkspaceChangedPayload)
	case EventWorkspaceReverted:
		return new(RevertResult)
	case EventApprovalRequested:
		return new(ApprovalRequestedPayload)
	case EventApprovalResolved:
		return new(ApprovalResolvedPayload)
	case EventSessionModeChanged:
		return new(SessionModeChangedPayload)
	case EventSessionUpdated:
		return new(SessionEdit)
	case EventBusHandlerWarning:
		return new(BusHandlerWarningPayload)
	case EventBusSubscriberRegistered:
		return new(BusSubscriberRegisteredPayload)
	case EventBusSubscriberUnregistered:
		return new(BusSubscriberUnregisteredPayload)
	case EventMessageStart:
		return new(MessageStartPayload)
	case EventTextDelta:
		return new(TextDeltaPayload)
	case EventThinkingDelta:
		return new(ThinkingDeltaPayload)
	case EventToolUseStart:
		return new(ToolUseStartPayload)
	case EventToolUseInputDelta:
		return new(ToolUseInputDeltaPayload)
	case EventToolUseEnd:
		return new(ToolUseEndPayload)
	case EventMessageComplete:
		return new(MessageCompletePayload)
	case EventToolOutputDelta:
		return new(ToolOutputDeltaPayload)
	}
	return nil
}
