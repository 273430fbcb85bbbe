package store

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/protocol"
)

// ErrNotFound is returned (wrapped) by reads of a missing row.
var ErrNotFound = errors.New("not found")

// Session is a session row.
type Session struct {
	ID                   string
	ParentSessionID      string // "" unless a worker
	WorkspacePath        string
	ActiveModel          string
	RoutingPolicyVersion string
	CostUSD              float64
	TurnCount            int
	CreatedAt            time.Time
	// Title is derived from the first user message by PromptTitle; ""
	// before it. SetTitle sets it once; Rename replaces it with the
	// user's (passed through Title only).
	Title string
	// LastActivityAt is the time of the session's newest catalog event
	// (CreatedAt before any): every AppendEvent moves it forward in the
	// transaction that stores the event.
	LastActivityAt time.Time
	// ContextTokens and ContextWindow are the size of the conversation
	// the next model call sends and its model's window, in tokens
	// (UpdateSession.Context); MaxTurnCostUSD and MaxSessionCostUSD the
	// session's cost limits (0: none).
	ContextTokens, ContextWindow      int64
	MaxTurnCostUSD, MaxSessionCostUSD float64
	// ForkedFromSessionID and ForkedFromMessageID are where a fork was
	// made from ("" unless a fork; POST /sessions/{id}/fork).
	ForkedFromSessionID, ForkedFromMessageID string
	// Queued is the session's queue, the next turn first: not a column
	// (the session manager holds it live; SummaryAsOf reads it as of an
	// event from queued_turns).
	Queued []protocol.QueuedTurn
	// Mode is the permission mode ("" is stored as "default").
	Mode string
	// SessionRules are the rules "allow for this session" answers added
	// (UpdateSession.AddRules), in the order they were added.
	SessionRules []string
	// Archived: the user put the session away (SetArchived); it is
	// still listed, marked, and works as before.
	Archived bool
}

// TurnStatus of a turn row.
type TurnStatus string

// Turn statuses.
const (
	TurnInFlight  TurnStatus = "in_flight"
	TurnCompleted TurnStatus = "completed"
	TurnCancelled TurnStatus = "cancelled"
	TurnFailed    TurnStatus = "failed"
)

// Turn is a turn row.
type Turn struct {
	ID        string
	SessionID string
	Status    TurnStatus
	Reason    string // cancellation or failure reason
	StartedAt time.Time
	EndedAt   time.Time // zero while in flight
	// Workspace checkpoints (docs/conversation.md): the checkpoint taken
	// before the turn first changed the workspace, the one taken when it
	// ended ("" for none), and what it changed (JSON of
	// protocol.TurnChanges; nil until known). A PutTurn never clears
	// them: a row written without them keeps those stored.
	CheckpointID, AfterCheckpointID string
	Changes                         json.RawMessage `json:",omitempty"` // omitted when nil, so a record round-trips it
}

// ToolStatus of a tool call row.
type ToolStatus string

// Tool call statuses (spec §6.2.6).
const (
	ToolPending   ToolStatus = "pending"
	ToolRunning   ToolStatus = "running"
	ToolCompleted ToolStatus = "completed"
	// ToolAwaitingApproval: the call waits for a user's answer
	// (approval.requested); ApprovalID names the request.
	ToolAwaitingApproval ToolStatus = "awaiting_approval"
	ToolFailed           ToolStatus = "failed"
	ToolCancelled        ToolStatus = "cancelled"
)

// ToolCall is a tool call row, keyed by metis's identity: (SessionID,
// MessageID, ID). The model's tool_use id alone is not unique: providers
// reuse ids across sessions and turns.
type ToolCall struct {
	ID           string // tool_use_id, unique within its message
	SessionID    string
	TurnID       string
	MessageID    string // the assistant message holding the tool_use block
	Name         string
	Input        json.RawMessage
	Status       ToolStatus
	Result       string
	IsError      bool
	ErrorClass   string
	ErrorMessage string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// ApprovalID is the approval request the call waited on ("" if it
	// never asked); Approval, once it is decided, how (nil before).
	ApprovalID string
	Approval   *Approval `json:",omitempty"`
}

// Approval is how a call's approval request was decided, kept with the
// call so that a late answer learns the winner (409 approval_resolved).
type Approval struct {
	Decision     string   `json:"decision"`
	Reason       string   `json:"reason"`
	Scope        string   `json:"scope,omitempty"`
	Message      string   `json:"message,omitempty"`
	SessionRules []string `json:"session_rules,omitempty"`
	ReleasedBy   string   `json:"released_by,omitempty"`
}

// Op is one write applied by the store's single writer. Ops submitted
// together are applied in order in one transaction; consecutive
// submissions are grouped into shared transactions (group commit).
type Op interface{ isOp() }

// AppendEvent appends a sealed catalog event. The writer sets
// Event.Seq to the assigned global sequence before reporting success.
// An id already stored for the session fails with ErrDuplicate.
type AppendEvent struct{ Event *event.Event }

// CreateSession inserts a session row; an existing id fails with
// ErrDuplicate.
type CreateSession struct{ Session Session }

// UpdateSession changes the non-empty fields of a session row; a
// missing session fails with ErrNotFound.
type UpdateSession struct {
	ID                   string
	ActiveModel          string // "" leaves it
	RoutingPolicyVersion string // "" leaves it
	Mode                 string `json:",omitempty"` // "" leaves it
	// AddRules are appended to the session's rules (those it holds
	// already are not added twice).
	AddRules []string `json:",omitempty"`
	// Context, if not nil, sets the session's context size.
	Context *ContextSize `json:",omitempty"`
	// Budget, if not nil, changes the session's cost limits.
	Budget *Budget `json:",omitempty"`
}

// ContextSize is the size of a session's conversation as the next model
// call sends it, and the window of that call's model, in tokens.
type ContextSize struct {
	Tokens int64
	Window int64
}

// Budget changes a session's cost limits in USD; a nil field leaves its
// limit, 0 removes it.
type Budget struct {
	MaxTurnCostUSD    *float64 `json:",omitempty"`
	MaxSessionCostUSD *float64 `json:",omitempty"`
}

// AddUsage adds to a session's running cost and turn count; a missing
// session fails with ErrNotFound.
type AddUsage struct {
	SessionID string
	CostUSD   float64
	Turns     int
}

// PutMessage inserts or replaces a message by id, keeping the position
// of its first insertion.
type PutMessage struct {
	Message message.Message
	// EventID is the event committed with the row; the bus fills it in
	// (see EventStamper). Snapshots use it to stay consistent.
	EventID string
}

// EventStamper is an op that records the id of the event it is
// committed with. The bus stamps such ops before submitting them.
type EventStamper interface {
	Op
	StampEvent(eventID string) Op
}

// StampEvent implements EventStamper.
func (p PutMessage) StampEvent(eventID string) Op { p.EventID = eventID; return p }

// SetTitle names a session that has no title yet: Title is the text of
// its first prompt, which PromptTitle cleans, and a session already titled
// (or a title that comes out "") leaves the row as it is. It is
// submitted with the first turn.started, so the title is written with
// the event that announces it.
type SetTitle struct {
	SessionID string
	Title     string
}

// PutTurn inserts or replaces a turn row by id.
type PutTurn struct{ Turn Turn }

// PutToolCall inserts or replaces a tool call row by (session, message,
// tool_use id).
type PutToolCall struct{ Call ToolCall }

func (AppendEvent) isOp()   {}
func (CreateSession) isOp() {}
func (UpdateSession) isOp() {}
func (AddUsage) isOp()      {}
func (PutMessage) isOp()    {}
func (PutTurn) isOp()       {}
func (SetTitle) isOp()      {}
func (PutToolCall) isOp()   {}

// EventQuery selects events of one session (or several), ascending by id.
type EventQuery struct {
	SessionIDs []string     // required: at least one
	AfterID    string       // exclusive lower bound; "" from the start
	UpToID     string       // inclusive upper bound; "" to the end
	Types      []event.Type // nil: every type
	Actors     []string     // nil: every actor
	Limit      int          // 0: no limit
}
