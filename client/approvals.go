package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// PendingApproval is a tool call waiting for a user's answer (the
// summary's pending_approvals, approval.requested).
type PendingApproval = protocol.PendingApproval

// Resolution is how an approval request was decided.
type Resolution = protocol.ApprovalResolution

// ResolvedError is the error of an answer that came after another had
// decided the request (409 approval_resolved): Resolution is the one
// that won.
type ResolvedError struct {
	*APIError
	Resolution Resolution
}

// Unwrap returns the API error.
func (e *ResolvedError) Unwrap() error { return e.APIError }

// Approve answers approval request approvalID of a session (a planner's
// session answers its workers' requests too): decision
// protocol.DecisionAllow or DecisionDeny, scope ScopeOnce or
// ScopeSession (an allow for the session adds the request's
// session_rules), reason the user's optional text (a deny passes it to
// the model). The first answer wins and gets its resolution; a later
// one gets a *ResolvedError carrying the resolution that won.
func (c *Client) Approve(ctx context.Context, sessionID, approvalID string, ans protocol.ApprovalAnswer) (Resolution, error) {
	var res Resolution
	err := c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/approvals/"+url.PathEscape(approvalID), ans, &res)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == protocol.CodeApprovalResolved {
		var body protocol.ApprovalConflict
		if json.Unmarshal(ae.Body, &body) == nil {
			return body.Resolution, &ResolvedError{APIError: ae, Resolution: body.Resolution}
		}
	}
	return res, err
}

// IsApprovalResolved reports whether err is a 409 approval_resolved:
// another answer (or the timeout, or a cancel) decided the request
// first.
func IsApprovalResolved(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == protocol.CodeApprovalResolved
}

// SetMode changes a session's permission mode (protocol.ModeDefault,
// ModeAcceptEdits, ModePlan, ModeAuto) and returns its summary.
func (c *Client) SetMode(ctx context.Context, sessionID, mode string) (Session, error) {
	var s Session
	err := c.do(ctx, http.MethodPatch, "/sessions/"+url.PathEscape(sessionID), protocol.SessionPatch{Mode: mode}, &s)
	return s, err
}

// PendingApprovals returns the requests waiting for an answer, oldest
// first.
func (v *View) PendingApprovals() []PendingApproval {
	out := make([]PendingApproval, 0, len(v.Pending))
	for _, p := range v.Pending {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b PendingApproval) int {
		if c := a.RequestedAt.Compare(b.RequestedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ApprovalID, b.ApprovalID)
	})
	return out
}

// applyApproval folds the permission events into the view.
func (v *View) applyApproval(ev *protocol.EventEnvelope, turnID string) error {
	switch protocol.EventType(ev.Type) {
	case protocol.EventApprovalRequested:
		var p protocol.ApprovalRequestedPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		if p.ApprovalID == "" {
			return errors.New("approval.requested without an approval_id")
		}
		pa := &PendingApproval{ApprovalID: p.ApprovalID, ToolUseID: p.ToolUseID, ToolName: p.ToolName, Input: p.Input,
			SessionID: ev.SessionID, TurnID: turnID, Kind: p.Kind, Targets: p.Targets, Reason: p.Reason,
			SessionRules: p.SessionRules}
		if at, err := time.Parse(time.RFC3339Nano, ev.TS); err == nil {
			pa.RequestedAt = at
		}
		if at, err := time.Parse(time.RFC3339Nano, p.ExpiresAt); err == nil {
			pa.ExpiresAt = at
		}
		if v.Pending == nil {
			v.Pending = map[string]*PendingApproval{}
		}
		v.Pending[p.ApprovalID] = pa
		if tc := v.Tools[p.ToolUseID]; tc != nil && tc.Status == "pending" {
			tc.Status = ToolAwaitingApproval
		}
	case protocol.EventApprovalResolved:
		var p protocol.ApprovalResolvedPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		delete(v.Pending, p.ApprovalID)
		if len(v.Pending) == 0 {
			v.Pending = nil
		}
		if tc := v.Tools[p.ToolUseID]; tc != nil && tc.Status == ToolAwaitingApproval {
			tc.Status = "pending" // tool.called or tool.failed follows
		}
	case protocol.EventSessionModeChanged:
		var p protocol.SessionModeChangedPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		if id := v.sessionID(); id == ev.SessionID || id == "" && p.Planner == "" {
			v.Mode = p.Mode
		}
	}
	return nil
}

// ToolAwaitingApproval is the status of a tool call waiting for an
// answer (ToolCall.Status).
const ToolAwaitingApproval = "awaiting_approval"

// sessionID returns the view's session, as its snapshot named it ("" if
// it had none).
func (v *View) sessionID() string {
	var s struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(v.Session, &s)
	return s.ID
}
