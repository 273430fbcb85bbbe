package acp

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// A tool call that must ask (approval.requested, of the session or of
// one of its workers) becomes a session/request_permission to the
// editor. The question runs on its own goroutine, so the follow goes on
// meanwhile; it is withdrawn ($/cancel_request, by cancelling its
// context) when the request is decided elsewhere (another client, the
// timeout, a cancel: approval.resolved) or the follow ends. The
// editor's choice is posted to POST /sessions/{id}/approvals/{id}:
//
//	allow_once    → allow, scope once
//	allow_always  → allow, scope session (the request's session_rules)
//	reject_once   → deny, scope once
//	reject_always → deny, scope session; the agent also denies, without
//	                asking, later requests of the session with the same
//	                session_rules (the server keeps no deny rules of a
//	                session)
//
// A cancelled outcome means the editor cancelled the prompt turn
// (session/cancel): the turn is cancelled, which denies the request on
// the server with reason cancelled.

// Permission option ids: the ACP kinds themselves.
const (
	optAllowOnce    = sdk.PermissionOptionId(sdk.PermissionOptionKindAllowOnce)
	optAllowAlways  = sdk.PermissionOptionId(sdk.PermissionOptionKindAllowAlways)
	optRejectOnce   = sdk.PermissionOptionId(sdk.PermissionOptionKindRejectOnce)
	optRejectAlways = sdk.PermissionOptionId(sdk.PermissionOptionKindRejectAlways)
)

// rejectedReason is what the model is told of a request the agent
// denied because the user rejected its kind for the session.
const rejectedReason = "the user rejected this for the rest of the session in the editor"

// asks are the questions a turn has open in the editor.
type asks struct {
	mu     sync.Mutex
	open   map[string]context.CancelFunc // approval id → withdraws the question
	closed bool
	wg     sync.WaitGroup
}

// start runs ask on its own goroutine under a context that withdraw(id)
// or close cancels; false if the approval is already asked or the asks
// are closed.
func (q *asks) start(parent context.Context, id string, ask func(context.Context)) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.open[id] != nil {
		return false
	}
	if q.open == nil {
		q.open = map[string]context.CancelFunc{}
	}
	ctx, cancel := context.WithCancel(parent)
	q.open[id] = cancel
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		defer q.withdraw(id)
		ask(ctx)
	}()
	return true
}

// withdraw cancels the question about approval id, if open.
func (q *asks) withdraw(id string) {
	q.mu.Lock()
	cancel := q.open[id]
	delete(q.open, id)
	q.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// close withdraws every open question and waits for their goroutines.
func (q *asks) close() {
	q.mu.Lock()
	q.closed = true
	ids := make([]string, 0, len(q.open))
	for id := range q.open {
		ids = append(ids, id)
	}
	q.mu.Unlock()
	for _, id := range ids {
		q.withdraw(id)
	}
	q.wg.Wait()
}

// rulesKey identifies the kind of a request for reject_always: its
// session rules ("" when it has none: such a request cannot be rejected
// for the session).
func rulesKey(rules []string) string {
	if len(rules) == 0 {
		return ""
	}
	r := slices.Clone(rules)
	slices.Sort(r)
	return strings.Join(r, "\n")
}

// rejected reports whether the user rejected requests like key for the
// session.
func (e *editorState) rejected(sid, key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return key != "" && e.rejections[sid][key]
}

func (e *editorState) reject(sid, key string) {
	if key == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rejections == nil {
		e.rejections = map[string]map[string]bool{}
	}
	if e.rejections[sid] == nil {
		e.rejections[sid] = map[string]bool{}
	}
	e.rejections[sid][key] = true
}

// permissionOptions are the choices offered for a request: the "for the
// session" ones only when the request has session rules (without them
// the server takes a session scope as once).
func permissionOptions(p protocol.PendingApproval) []sdk.PermissionOption {
	opts := []sdk.PermissionOption{{OptionId: optAllowOnce, Kind: sdk.PermissionOptionKindAllowOnce, Name: "Allow once"}}
	if len(p.SessionRules) > 0 {
		opts = append(opts, sdk.PermissionOption{OptionId: optAllowAlways, Kind: sdk.PermissionOptionKindAllowAlways,
			Name: "Allow for this session: " + strings.Join(p.SessionRules, ", ")})
	}
	opts = append(opts, sdk.PermissionOption{OptionId: optRejectOnce, Kind: sdk.PermissionOptionKindRejectOnce, Name: "Reject"})
	if len(p.SessionRules) > 0 {
		opts = append(opts, sdk.PermissionOption{OptionId: optRejectAlways, Kind: sdk.PermissionOptionKindRejectAlways,
			Name: "Reject for this session"})
	}
	return opts
}

// answerFor maps the editor's choice to the answer posted to metis; ok
// is false for an option id it did not offer.
func answerFor(opt sdk.PermissionOptionId) (ans protocol.ApprovalAnswer, ok bool) {
	switch opt {
	case optAllowOnce:
		return protocol.ApprovalAnswer{Decision: protocol.DecisionAllow, Scope: protocol.ScopeOnce}, true
	case optAllowAlways:
		return protocol.ApprovalAnswer{Decision: protocol.DecisionAllow, Scope: protocol.ScopeSession}, true
	case optRejectOnce:
		return protocol.ApprovalAnswer{Decision: protocol.DecisionDeny, Scope: protocol.ScopeOnce}, true
	case optRejectAlways:
		return protocol.ApprovalAnswer{Decision: protocol.DecisionDeny, Scope: protocol.ScopeSession}, true
	}
	return protocol.ApprovalAnswer{}, false
}

// approvalRequested handles approval.requested of the session or of a
// worker (whose session is ev.SessionID): the call is announced if the
// editor has not seen it (a worker's call), then the editor is asked.
func (t *turn) approvalRequested(ctx context.Context, ev *protocol.EventEnvelope) {
	var p protocol.ApprovalRequestedPayload
	if json.Unmarshal(ev.Payload, &p) != nil || p.ApprovalID == "" || p.ToolUseID == "" {
		return
	}
	t.askApproval(ctx, protocol.PendingApproval{ApprovalID: p.ApprovalID, ToolUseID: p.ToolUseID, ToolName: p.ToolName,
		Input: p.Input, SessionID: ev.SessionID, Kind: p.Kind, Targets: p.Targets, Reason: p.Reason, SessionRules: p.SessionRules})
}

// askApproval asks the editor about one waiting request (from an event,
// or from a snapshot's pending_approvals after session/load).
func (t *turn) askApproval(ctx context.Context, p protocol.PendingApproval) {
	worker := p.SessionID != "" && p.SessionID != t.sid
	if worker {
		if _, ok := t.workers[p.SessionID]; !ok {
			return // not a worker of this turn
		}
	}
	s := t.announce(ctx, p.ToolUseID, p.ToolName, p.Input)
	if worker {
		s.worker = true
	}
	if t.a.conn == nil {
		return
	}
	key := rulesKey(p.SessionRules)
	if t.a.ui.rejected(t.sid, key) {
		t.asks.start(t.ctx, p.ApprovalID, func(ctx context.Context) {
			t.answer(ctx, p, protocol.ApprovalAnswer{Decision: protocol.DecisionDeny, Scope: protocol.ScopeOnce, Reason: rejectedReason})
		})
		return
	}
	title := toolTitle(p.ToolName, p.Input)
	if worker {
		title = "Worker: " + title
	}
	if p.Reason != "" {
		title += " (" + p.Reason + ")"
	}
	kind := toolKind(p.ToolName)
	status := sdk.ToolCallStatusPending
	req := sdk.RequestPermissionRequest{
		SessionId: sdk.SessionId(t.sid),
		ToolCall: sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId(p.ToolUseID), Title: &title, Kind: &kind, Status: &status,
			RawInput: rawInput(p.Input), Content: proposedContent(p.ToolName, p.Input, t.workspace),
			Locations: toolLocations(p.ToolName, p.Input, t.workspace)},
		Options: permissionOptions(p),
		Meta: map[string]any{"metis": map[string]any{"approval_id": p.ApprovalID, "session_id": p.SessionID,
			"targets": p.Targets, "reason": p.Reason, "session_rules": p.SessionRules}},
	}
	t.asks.start(t.ctx, p.ApprovalID, func(ctx context.Context) {
		resp, err := t.a.conn.RequestPermission(ctx, req)
		switch {
		case ctx.Err() != nil:
			return // decided elsewhere, or the follow ended
		case err != nil:
			// The editor cannot ask (no session/request_permission): the
			// call is refused rather than left waiting for the timeout.
			t.a.log.Warn("the editor did not answer a permission request; denying it", "session", t.sid, "approval", p.ApprovalID, "err", err)
			t.answer(ctx, p, protocol.ApprovalAnswer{Decision: protocol.DecisionDeny, Scope: protocol.ScopeOnce,
				Reason: "the editor could not ask the user"})
			return
		case resp.Outcome.Cancelled != nil:
			// ACP's cancelled outcome: the editor cancelled the prompt
			// turn; cancelling it denies the request (reason cancelled).
			t.requestCancel()
			return
		case resp.Outcome.Selected == nil:
			return
		}
		ans, ok := answerFor(resp.Outcome.Selected.OptionId)
		if !ok {
			t.a.log.Warn("the editor chose an option it was not offered; denying", "session", t.sid, "option", resp.Outcome.Selected.OptionId)
			ans = protocol.ApprovalAnswer{Decision: protocol.DecisionDeny, Scope: protocol.ScopeOnce}
		}
		if resp.Outcome.Selected.OptionId == optRejectAlways {
			t.a.ui.reject(t.sid, key)
		}
		t.answer(ctx, p, ans)
	})
}

// answer posts an answer; one that comes after the request was decided
// otherwise (409 approval_resolved) is only logged.
func (t *turn) answer(ctx context.Context, p protocol.PendingApproval, ans protocol.ApprovalAnswer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpTimeout)
	defer cancel()
	if _, err := t.a.c.Approve(ctx, t.sid, p.ApprovalID, ans); err != nil {
		if client.IsApprovalResolved(err) {
			t.a.log.Info("the approval was decided before the editor's answer", "session", t.sid, "approval", p.ApprovalID)
			return
		}
		t.a.log.Warn("answer the approval", "session", t.sid, "approval", p.ApprovalID, "err", err)
	}
}

// approvalResolved withdraws the editor's question about a request
// decided elsewhere.
func (t *turn) approvalResolved(ev *protocol.EventEnvelope) {
	var p protocol.ApprovalResolvedPayload
	if json.Unmarshal(ev.Payload, &p) == nil && p.ApprovalID != "" {
		t.asks.withdraw(p.ApprovalID)
	}
}
