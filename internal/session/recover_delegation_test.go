package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// TestRecoverFailsUnfinishedDelegations: a crash left a planner's turn
// in flight with two delegations, one finished and one whose worker was
// still running. At restart the running worker's turn ends first
// (turn.cancelled, server_restart), then the planner records
// delegate.failed for that worker only (failure mode interrupted), then
// the planner's turn ends: the order a live cancel gives, and no worker
// is left "running" in a snapshot. A second restart emits nothing more.
func TestRecoverFailsUnfinishedDelegations(t *testing.T) {
	h := servertest.Start(t, "")
	ctx := context.Background()
	planner := h.CreateSession()
	done, running := event.NewID("sess_"), event.NewID("sess_")
	now := time.Now().UTC()
	var ops []store.Op
	for _, w := range []string{done, running} {
		ops = append(ops, store.CreateSession{Session: store.Session{ID: w, ParentSessionID: planner,
			WorkspacePath: h.Workspace, ActiveModel: "builtin:demo", CreatedAt: now, LastActivityAt: now}})
	}
	ops = append(ops,
		store.PutTurn{Turn: store.Turn{ID: "turn_planner", SessionID: planner, Status: store.TurnInFlight, StartedAt: now}},
		store.PutTurn{Turn: store.Turn{ID: "turn_running", SessionID: running, Status: store.TurnInFlight,
			StartedAt: now.Add(time.Millisecond)}})
	servertest.Must(t, h.Server.Store.Apply(ctx, ops...))
	em, err := h.Server.Bus.Emitter(ctx, planner)
	servertest.Must(t, err)
	for _, s := range []bus.Spec{
		{Type: event.DelegateStarted, Payload: protocol.DelegateStartedPayload{WorkerSessionID: done, Task: "a", Model: "builtin:demo", Depth: 1}},
		{Type: event.DelegateCompleted, Payload: protocol.DelegateCompletedPayload{WorkerSessionID: done, Success: true, Summary: "ok"}},
		{Type: event.DelegateStarted, Payload: protocol.DelegateStartedPayload{WorkerSessionID: running, Task: "b", Model: "builtin:demo", Depth: 1}},
	} {
		s.TurnID, s.Actor = "turn_planner", event.ActorTool
		_, err := em.EmitWait(ctx, s)
		servertest.Must(t, err)
	}
	h.Stop()

	h2 := servertest.Start(t, h.Home)
	evs, err := h2.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{planner, running},
		Types: []event.Type{event.TurnCancelled, event.DelegateFailed}})
	servertest.Must(t, err)
	type step struct {
		session string
		typ     event.Type
	}
	want := []step{{running, event.TurnCancelled}, {planner, event.DelegateFailed}, {planner, event.TurnCancelled}}
	if len(evs) != len(want) {
		t.Fatalf("recovery emitted %d events (%v), want %v", len(evs), servertest.Types(evs), want)
	}
	for i, ev := range evs {
		if (step{ev.SessionID, ev.Type}) != want[i] {
			t.Fatalf("event %d: %s in %s, want %v", i, ev.Type, ev.SessionID, want[i])
		}
	}
	var failed protocol.DelegateFailedPayload
	servertest.Must(t, evs[1].DecodePayload(&failed))
	if failed.WorkerSessionID != running || failed.FailureMode != protocol.DelegateFailureInterrupted ||
		failed.Message == "" || evs[1].TurnID != "turn_planner" {
		t.Fatalf("delegate.failed %s of turn %q", evs[1].Payload, evs[1].TurnID)
	}
	h2.Stop()

	h3 := servertest.Start(t, h.Home)
	again, err := h3.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{planner, running},
		Types: []event.Type{event.TurnCancelled, event.DelegateFailed}})
	servertest.Must(t, err)
	if len(again) != len(evs) {
		t.Fatalf("a second restart emitted more: %v", servertest.Types(again))
	}
}
