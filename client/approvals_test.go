package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

func envelope(id, typ, session, turn string, payload string) *protocol.EventEnvelope {
	return &protocol.EventEnvelope{ID: id, Type: typ, SessionID: session, TurnID: &turn, TS: "2026-11-28T10:00:00.5Z",
		Actor: "agent", Payload: json.RawMessage(payload)}
}

// TestViewPendingApprovals: the view keeps the requests waiting, from
// the snapshot and from the events (a worker's too), marks the call
// waiting, forgets a request once resolved, and follows the mode.
func TestViewPendingApprovals(t *testing.T) {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{SnapshotAtEventID: "evt_1",
		Session: json.RawMessage(`{"id":"sess_p","mode":"default","pending_approvals":[
			{"approval_id":"apr_old","tool_use_id":"tu_old","tool_name":"shell","input":{"command":"ls"},"session_id":"sess_p",
			 "requested_at":"2026-11-28T09:00:00Z"}]}`)})
	if v.Mode != "default" || len(v.Pending) != 1 || v.Pending["apr_old"].ToolName != "shell" {
		t.Fatalf("after the snapshot: mode %q, pending %+v", v.Mode, v.Pending)
	}
	v.Apply(envelope("evt_2", "tool.use_start", "sess_p", "t1", `{"message_id":"m1","content_block_index":0,"tool_use_id":"tu1","tool_name":"write_file"}`))
	v.Apply(envelope("evt_3", "approval.requested", "sess_p", "t1",
		`{"approval_id":"apr_1","tool_use_id":"tu1","tool_name":"write_file","input":{"path":"a"},"kind":"edit","targets":["a"],
		  "session_rules":["write_file(a)"],"expires_at":"2026-11-28T10:05:00Z"}`))
	v.Apply(envelope("evt_4", "approval.requested", "sess_w", "t9",
		`{"approval_id":"apr_w","tool_use_id":"tu9","tool_name":"shell","input":{"command":"make"}}`))
	got := v.PendingApprovals()
	if len(got) != 3 || got[0].ApprovalID != "apr_old" || got[1].ApprovalID != "apr_1" || got[2].SessionID != "sess_w" {
		t.Fatalf("pending, in order: %+v", got)
	}
	if got[1].ExpiresAt.IsZero() || got[1].Kind != "edit" || got[1].TurnID != "t1" {
		t.Fatalf("request details: %+v", got[1])
	}
	if st := v.Tools["tu1"].Status; st != client.ToolAwaitingApproval {
		t.Fatalf("the call waiting: %q", st)
	}
	v.Apply(envelope("evt_5", "approval.resolved", "sess_p", "t1", `{"approval_id":"apr_1","tool_use_id":"tu1","decision":"allow","reason":"user"}`))
	v.Apply(envelope("evt_6", "tool.called", "sess_p", "t1", `{"tool_use_id":"tu1","tool_name":"write_file"}`))
	if _, ok := v.Pending["apr_1"]; ok || v.Tools["tu1"].Status != "running" {
		t.Fatalf("after the answer: pending %v, tool %q", v.Pending, v.Tools["tu1"].Status)
	}
	v.Apply(envelope("evt_7", "session.mode_changed", "sess_w", "", `{"mode":"plan","previous_mode":"default","planner_session_id":"sess_p"}`))
	if v.Mode != "default" {
		t.Fatalf("a worker's mode change moved the view's: %q", v.Mode)
	}
	v.Apply(envelope("evt_8", "session.mode_changed", "sess_p", "", `{"mode":"auto","previous_mode":"default"}`))
	if v.Mode != "auto" {
		t.Fatalf("mode %q, want auto", v.Mode)
	}
	if c := v.Clone(); len(c.Pending) != 2 || c.Mode != "auto" {
		t.Fatalf("clone: %+v %q", c.Pending, c.Mode)
	}
}

// TestApproveConflict: a late answer gets the resolution that won.
func TestApproveConflict(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/sessions/sess_1/approvals/apr_1" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(protocol.ApprovalConflict{
			Error:      protocol.HTTPErrorDetail{Code: protocol.CodeApprovalResolved, Message: "decided already"},
			Resolution: protocol.ApprovalResolution{ApprovalID: "apr_1", Decision: "deny", Reason: "timeout"}})
	}))
	defer srv.Close()
	c := client.New(srv.URL)
	res, err := c.Approve(context.Background(), "sess_1", "apr_1", protocol.ApprovalAnswer{Decision: "allow"})
	var re *client.ResolvedError
	if !errors.As(err, &re) || !client.IsApprovalResolved(err) || re.Resolution.Reason != "timeout" || res.Decision != "deny" {
		t.Fatalf("Approve: %+v, %v", res, err)
	}
}

// Answering every request of a session as it comes: allow reads and
// listings, deny anything else with a reason the model reads.
func ExampleClient_Approve() {
	c := client.New("http://127.0.0.1:8421")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sid := "sess_…"
	answered := map[string]bool{}
	_ = c.Follow(ctx, sid, client.FollowOptions{OnUpdate: func(u client.Update) {
		for _, p := range u.View.PendingApprovals() {
			if answered[p.ApprovalID] {
				continue
			}
			answered[p.ApprovalID] = true
			ans := protocol.ApprovalAnswer{Decision: protocol.DecisionDeny, Reason: "not from this script"}
			if p.Kind == "read" {
				ans = protocol.ApprovalAnswer{Decision: protocol.DecisionAllow, Scope: protocol.ScopeOnce}
			}
			// Answer at the session's URL: a planner's answers its workers' requests too.
			res, err := c.Approve(ctx, sid, p.ApprovalID, ans)
			if client.IsApprovalResolved(err) {
				fmt.Println("another client answered first:", res.Decision)
			}
		}
	}})
}
