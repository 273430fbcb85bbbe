package protocol

import "time"

// SessionSummary is a session as clients see it: the answer of POST
// /sessions, each entry of GET /sessions, and the snapshot's session
// object (spec §3.4), extended with parent_session_id and created_at
// (contract §3) and the fields a session list shows.
type SessionSummary struct {
	ID                   string  `json:"id"`
	ParentSessionID      *string `json:"parent_session_id"` // null unless a worker
	WorkspacePath        string  `json:"workspace_path"`
	ActiveModel          string  `json:"active_model"`
	RoutingPolicyVersion string  `json:"routing_policy_version"`
	// CostSoFarUSD includes the session's workers' costs.
	CostSoFarUSD float64 `json:"cost_so_far_usd"`
	TurnCount    int     `json:"turn_count"`
	// CurrentTurnID and CurrentTurnStatus (TurnStatusInFlight or
	// TurnStatusCancelling) are null when no turn is in flight.
	CurrentTurnID     *string   `json:"current_turn_id"`
	CurrentTurnStatus *string   `json:"current_turn_status"`
	CreatedAt         time.Time `json:"created_at"`
	// Title is the session's first user message, white space collapsed
	// and cut at 80 runes (ending "…"); "" before the first turn.
	Title string `json:"title"`
	// LastActivityAt is the time of the session's newest catalog event
	// (its creation before any turn). A worker's events do not count
	// for its planner.
	LastActivityAt time.Time `json:"last_activity_at"`
	// ContextTokens is the size of the conversation the next model call
	// would send, in tokens (the provider's count after a call, estimated
	// since); ContextWindow is the model's window, 0 when unknown
	// (contract §9, docs/context.md).
	ContextTokens int64 `json:"context_tokens"`
	ContextWindow int64 `json:"context_window"`
	// MaxTurnCostUSD and MaxSessionCostUSD are the session's cost
	// limits (0: none); PATCH /sessions/{id} changes them.
	MaxTurnCostUSD    float64 `json:"max_turn_cost_usd"`
	MaxSessionCostUSD float64 `json:"max_session_cost_usd"`
	// ForkedFrom is the session and message a fork was made from (POST
	// /sessions/{id}/fork); null unless a fork.
	ForkedFrom *ForkedFrom `json:"forked_from"`
	// QueuedTurns are the turns waiting in the session's queue, the
	// next first (omitted when none; docs/conversation.md).
	QueuedTurns []QueuedTurn `json:"queued_turns,omitempty"`
	// Mode is the session's permission mode (ModeDefault, …).
	Mode string `json:"mode"`
	// PendingApprovals are the tool calls waiting for an answer, this
	// session's and its workers' (never null).
	PendingApprovals []PendingApproval `json:"pending_approvals"`
	// SessionRules are the allow rules "allow for this session" answers
	// added, which this session and its workers follow (never null).
	// They are kept on the delegation tree's top session: a worker's
	// own list is that session's.
	SessionRules []string `json:"session_rules"`
	// BackgroundCommands are the session's background commands
	// (docs/tool-dispatcher.md), running ones and those ended recently,
	// oldest first (never null).
	BackgroundCommands []BackgroundCommand `json:"background_commands"`
	// Archived: the user put the session away (PATCH /sessions/{id}
	// "archived"). It is still listed and still works; clients list it
	// apart. Omitted when false.
	Archived bool `json:"archived,omitempty"`
}

// SessionEdit is how PATCH /sessions/{id} renames and archives a
// session (the body may also hold the mode, SessionPatch, and the cost
// limits, SessionBudgetPatch). A nil field leaves it.
type SessionEdit struct {
	// Title replaces the session's title (white space collapsed, at most
	// 80 characters; empty is refused). A renamed session keeps its name.
	Title *string `json:"title,omitempty"`
	// Archived puts the session away (true) or back (false).
	Archived *bool `json:"archived,omitempty"`
}

// EventSessionUpdated: PATCH /sessions/{id} renamed or archived the
// session (payload SessionEdit: the fields changed, the title as
// stored). A field set to what the session already has is left out;
// with nothing left no event is committed.
const EventSessionUpdated EventType = "session.updated"

// ModelList is the answer of GET /models: the models sessions can be
// created with (POST /sessions "model").
type ModelList struct {
	// Default is the model a session gets when it names none.
	Default string      `json:"default"`
	Models  []ModelInfo `json:"models"`
	// Unavailable are the providers the server knows but cannot use,
	// with the reason (a missing key).
	Unavailable []UnavailableProvider `json:"unavailable"`
}

// ModelInfo is one model of GET /models.
type ModelInfo struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
}

// UnavailableProvider is a provider GET /models cannot offer, and why.
type UnavailableProvider struct {
	Provider string `json:"provider"`
	Reason   string `json:"reason"`
}

// Turn statuses of a summary's current_turn_status.
const (
	TurnStatusInFlight   = "in_flight"
	TurnStatusCancelling = "cancelling"
)

// CancelResult is what a cancel did: the status of the answer to POST
// /sessions/{id}/turns/{turn_id}/cancel (and of the stream's cancel).
type CancelResult string

// Cancel outcomes.
const (
	// CancelCancelling: the turn was in flight and is now being cancelled.
	CancelCancelling CancelResult = TurnStatusCancelling
	// CancelAlreadyCancelling: a redundant cancel (spec §6.5); a
	// bus.handler_warning was emitted and nothing else happened.
	CancelAlreadyCancelling CancelResult = "already_cancelling"
	// CancelAlreadyEnded: the turn had ended before the cancel arrived.
	CancelAlreadyEnded CancelResult = "already_ended"
)

// SessionList is the answer of GET /sessions: the sessions newest
// first and, when HasMore, the cursor of the next (older) page to pass
// as ?before=.
type SessionList struct {
	Sessions []SessionSummary `json:"sessions"`
	HasMore  bool             `json:"has_more"`
	Next     string           `json:"next,omitempty"`
}

// AttachInfo is the answer of GET /sessions/{id} (spec §3.1), extended
// with the session summary. AttachToken is single-use and short-lived.
type AttachInfo struct {
	SessionID   string         `json:"session_id"`
	ActiveModel string         `json:"active_model"`
	AttachToken string         `json:"attach_token"`
	WSURL       string         `json:"ws_url"`
	Session     SessionSummary `json:"session"`
}
