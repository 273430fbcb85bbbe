package session_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// TestRecoverDeniesAWaitingRequest: a crash with a call waiting for
// approval: at restart its request is denied (approval.resolved, deny,
// reason cancelled) before the call fails (cancelled, not started) and
// the turn ends as crash recovery ends it; an answer then gets 409 with
// that resolution.
func TestRecoverDeniesAWaitingRequest(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx := context.Background()
	now := time.Now()
	turn := "turn_crashed"
	servertest.Must(t, h.Server.Store.Apply(ctx,
		store.PutTurn{Turn: store.Turn{ID: turn, SessionID: sid, Status: store.TurnInFlight, StartedAt: now}},
		store.PutToolCall{Call: store.ToolCall{ID: "call_1", SessionID: sid, TurnID: turn, MessageID: "msg_1", Name: "shell",
			Input: []byte(`{"command":"ls"}`), Status: store.ToolAwaitingApproval, ApprovalID: "apr_left", CreatedAt: now, UpdatedAt: now}}))
	h.Stop()

	h2 := servertest.Start(t, h.Home)
	evs, err := h2.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid},
		Types: []event.Type{event.ApprovalResolved, event.ToolFailed, event.TurnCancelled}})
	servertest.Must(t, err)
	var types []event.Type
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	if !slices.Equal(types, []event.Type{event.ApprovalResolved, event.ToolFailed, event.TurnCancelled}) {
		t.Fatalf("recovery: %v", types)
	}
	var res protocol.ApprovalResolvedPayload
	servertest.Must(t, evs[0].DecodePayload(&res))
	if res.ApprovalID != "apr_left" || res.Decision != "deny" || res.Reason != "cancelled" || evs[0].Actor != event.ActorSession {
		t.Fatalf("approval.resolved: %+v (actor %s)", res, evs[0].Actor)
	}
	var failed protocol.ToolFailedPayload
	servertest.Must(t, evs[1].DecodePayload(&failed))
	if failed.ErrorClass != "cancelled" || failed.Started {
		t.Fatalf("tool.failed: %+v", failed)
	}
	_, err = h2.Server.Sessions.Approve(ctx, sid, "apr_left", protocol.ApprovalAnswer{Decision: "allow"})
	var resolved *session.ResolvedError
	if !errors.As(err, &resolved) || resolved.Res.Reason != "cancelled" {
		t.Fatalf("an answer after the restart: %v", err)
	}
	if sum, err := h2.Server.Sessions.Get(ctx, sid); err != nil || len(sum.PendingApprovals) != 0 {
		t.Fatalf("pending after recovery: %+v (%v)", sum.PendingApprovals, err)
	}
}
