package session_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// TestRecoverTreeEndsOnlyThatTreesTurns: turns are open in two
// delegation trees (a planner with a worker, and another root), as a
// node that died would leave them. OpenTrees names both trees;
// RecoverTree of the first ends its planner's and its worker's turns
// with the canonical sequence of a lost owner (turn.cancelled, reason
// owner_lost, phase interrupted; the worker's running tool call marked
// cancelled) and leaves the other tree's turn open.
func TestRecoverTreeEndsOnlyThatTreesTurns(t *testing.T) {
	h := servertest.Start(t, "")
	ctx := context.Background()
	planner, other := h.CreateSession(), h.CreateSession()
	worker := event.NewID("sess_")
	now := time.Now().UTC()
	servertest.Must(t, h.Server.Store.Apply(ctx,
		store.CreateSession{Session: store.Session{ID: worker, ParentSessionID: planner, WorkspacePath: h.Workspace,
			ActiveModel: "builtin:demo", CreatedAt: now, LastActivityAt: now}},
		store.PutTurn{Turn: store.Turn{ID: "turn_planner", SessionID: planner, Status: store.TurnInFlight, StartedAt: now}},
		store.PutTurn{Turn: store.Turn{ID: "turn_worker", SessionID: worker, Status: store.TurnInFlight, StartedAt: now}},
		store.PutToolCall{Call: store.ToolCall{ID: "call_1", SessionID: worker, TurnID: "turn_worker", MessageID: "msg_1",
			Name: "shell", Status: store.ToolRunning, CreatedAt: now, UpdatedAt: now}},
		store.PutTurn{Turn: store.Turn{ID: "turn_other", SessionID: other, Status: store.TurnInFlight, StartedAt: now}},
	))

	trees, err := h.Server.Sessions.OpenTrees(ctx)
	servertest.Must(t, err)
	slices.Sort(trees)
	want := []string{planner, other}
	slices.Sort(want)
	if !slices.Equal(trees, want) {
		t.Fatalf("open trees %v, want %v", trees, want)
	}

	ended, err := h.Server.Sessions.RecoverTree(ctx, planner)
	servertest.Must(t, err)
	slices.Sort(ended)
	if !slices.Equal(ended, []string{"turn_planner", "turn_worker"}) {
		t.Fatalf("ended %v, want the planner's and the worker's turns", ended)
	}
	for _, id := range []string{"turn_planner", "turn_worker"} {
		tr, err := h.Server.Store.Turn(ctx, id)
		if err != nil || tr.Status != store.TurnCancelled || tr.Reason != protocol.CancelReasonOwnerLost {
			t.Errorf("turn %s: %+v, %v", id, tr, err)
		}
	}
	if c, err := h.Server.Store.ToolCall(ctx, worker, "msg_1", "call_1"); err != nil || c.Status != store.ToolCancelled {
		t.Errorf("the worker's running call: %+v, %v", c, err)
	}
	if tr, err := h.Server.Store.Turn(ctx, "turn_other"); err != nil || tr.Status != store.TurnInFlight {
		t.Errorf("the other tree's turn: %+v, %v", tr, err)
	}
	for _, sid := range []string{planner, worker} {
		var found bool
		for _, ev := range h.Live.Events(sid) {
			if ev.Type != event.TurnCancelled {
				continue
			}
			found = true
			var p protocol.TurnCancelledPayload
			servertest.Must(t, json.Unmarshal(ev.Payload, &p))
			if p.Reason != protocol.CancelReasonOwnerLost || p.Phase != protocol.CancelPhaseInterrupted || ev.Actor != event.ActorSession {
				t.Errorf("%s: turn.cancelled %s by %s", sid, ev.Payload, ev.Actor)
			}
		}
		if !found {
			t.Errorf("%s: no turn.cancelled delivered", sid)
		}
	}
	if trees, err := h.Server.Sessions.OpenTrees(ctx); err != nil || !slices.Equal(trees, []string{other}) {
		t.Fatalf("open trees after: %v, %v", trees, err)
	}
}
