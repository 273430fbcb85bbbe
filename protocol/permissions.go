package protocol

import (
	"encoding/json"
	"time"
)

// Session modes (contract §7): the summary's mode, the mode of POST
// /sessions and PATCH /sessions/{id}, session.mode_changed's mode.
const (
	ModeDefault     = "default"
	ModeAcceptEdits = "accept_edits"
	ModePlan        = "plan"
	ModeAuto        = "auto"
)

// ValidMode reports whether s is one of the four modes.
func ValidMode(s string) bool {
	switch s {
	case ModeDefault, ModeAcceptEdits, ModePlan, ModeAuto:
		return true
	}
	return false
}

// Approval decisions, scopes and resolution reasons (contract §7).
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"

	// ScopeOnce answers this request only; ScopeSession (with allow)
	// also adds the request's session_rules to the session.
	ScopeOnce    = "once"
	ScopeSession = "session"

	// ApprovalReasonUser: a client answered (or an answer's session
	// rule covered the request); ApprovalReasonTimeout: nobody answered
	// within --approval-timeout; ApprovalReasonCancelled: the turn was
	// cancelled (or the server stopped or crashed) while it waited.
	ApprovalReasonUser      = "user"
	ApprovalReasonTimeout   = "timeout"
	ApprovalReasonCancelled = "cancelled"
)

// PendingApproval is one entry of the session summary's
// pending_approvals: a tool call waiting for a user's answer. A
// planner's list also holds its workers' requests, SessionID telling
// whose call it is.
type PendingApproval struct {
	ApprovalID string          `json:"approval_id"`
	ToolUseID  string          `json:"tool_use_id"`
	ToolName   string          `json:"tool_name"`
	Input      json.RawMessage `json:"input"`
	// SessionID is the session whose call waits: this one, or one of
	// its workers.
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id,omitempty"`
	// Kind is what the tool does: read, edit, execute, fetch,
	// delegate or external.
	Kind string `json:"kind,omitempty"`
	// Targets are what the call's rules match on: the command line of
	// shell, the workspace-relative paths of a file tool, a URL.
	Targets []string `json:"targets,omitempty"`
	// Reason says why the call asks (the mode's default, a rule, a
	// command that cannot be checked, no sandbox).
	Reason string `json:"reason,omitempty"`
	// SessionRules are the allow rules an answer with scope session
	// adds (empty: such an answer counts as once).
	SessionRules []string  `json:"session_rules,omitempty"`
	RequestedAt  time.Time `json:"requested_at,omitzero"`
	// ExpiresAt is when the request is denied with reason timeout
	// (omitted when the server answering does not run the turn).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// ApprovalAnswer is the body of POST /sessions/{id}/approvals/{approval_id}.
type ApprovalAnswer struct {
	Decision string `json:"decision"`        // DecisionAllow or DecisionDeny
	Scope    string `json:"scope,omitempty"` // ScopeOnce (the default) or ScopeSession
	// Reason is the user's optional text; with a deny it is passed to
	// the model. At most MaxApprovalReason bytes.
	Reason string `json:"reason,omitempty"`
}

// MaxApprovalReason bounds ApprovalAnswer.Reason, in bytes.
const MaxApprovalReason = 2000

// ApprovalResolution is how a request was decided: the answer of a
// successful POST .../approvals/{approval_id} (the answer that won), and
// the resolution of a 409 approval_resolved (the earlier one that won).
type ApprovalResolution struct {
	ApprovalID string `json:"approval_id"`
	ToolUseID  string `json:"tool_use_id"`
	SessionID  string `json:"session_id"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason"`          // ApprovalReason*
	Scope      string `json:"scope,omitempty"` // for reason user
	// Message is the user's text, when the answer carried one.
	Message string `json:"message,omitempty"`
	// SessionRules are the rules an allow with scope session added.
	SessionRules []string `json:"session_rules,omitempty"`
	// ReleasedBy is the approval whose session rule covered this one
	// (it was then allowed without its own answer).
	ReleasedBy string `json:"released_by,omitempty"`
}

// ApprovalConflict is the body of a 409 approval_resolved: the error,
// and the resolution that had won.
type ApprovalConflict struct {
	Error      HTTPErrorDetail    `json:"error"`
	Resolution ApprovalResolution `json:"resolution"`
}

// SessionPatch is the body of PATCH /sessions/{id}.
type SessionPatch struct {
	Mode string `json:"mode"`
}
