package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
)

// TestRecoverCancelsEveryLostCall: two sessions crashed with a turn in
// flight each, and their models used the same tool call ids: at restart
// every pending or running call of both turns is marked cancelled, and
// a call that had completed stays completed.
func TestRecoverCancelsEveryLostCall(t *testing.T) {
	h := servertest.Start(t, "")
	a, b := h.CreateSession(), h.CreateSession()
	ctx := context.Background()
	now := time.Now()
	type key struct{ sid, msg, id string }
	var lost []key
	var ops []store.Op
	for _, sid := range []string{a, b} {
		turn := "turn_crashed_" + sid
		ops = append(ops, store.PutTurn{Turn: store.Turn{ID: turn, SessionID: sid, Status: store.TurnInFlight, StartedAt: now}})
		for _, msg := range []string{"msg_first_" + sid, "msg_second_" + sid} {
			for id, st := range map[string]store.ToolStatus{"call_1": store.ToolRunning, "call_2": store.ToolPending, "call_3": store.ToolCompleted} {
				ops = append(ops, store.PutToolCall{Call: store.ToolCall{ID: id, SessionID: sid, TurnID: turn, MessageID: msg,
					Name: "list_dir", Status: st, CreatedAt: now, UpdatedAt: now}})
				if st != store.ToolCompleted {
					lost = append(lost, key{sid, msg, id})
				}
			}
		}
	}
	servertest.Must(t, h.Server.Store.Apply(ctx, ops...))
	h.Stop()

	h2 := servertest.Start(t, h.Home)
	for _, k := range lost {
		c, err := h2.Server.Store.ToolCall(ctx, k.sid, k.msg, k.id)
		if err != nil || c.Status != store.ToolCancelled || c.ErrorClass != "cancelled" {
			t.Errorf("lost call %v: %+v, %v", k, c, err)
		}
	}
	for _, sid := range []string{a, b} {
		calls, err := h2.Server.Store.ToolCalls(ctx, "turn_crashed_"+sid)
		servertest.Must(t, err)
		if len(calls) != 6 {
			t.Fatalf("%s: %d rows, want 6", sid, len(calls))
		}
		for _, c := range calls {
			if c.ID == "call_3" && c.Status != store.ToolCompleted {
				t.Errorf("completed call changed: %+v", c)
			}
		}
		if tr, _ := h2.Server.Store.Turn(ctx, "turn_crashed_"+sid); tr.Status != store.TurnCancelled {
			t.Errorf("turn %+v", tr)
		}
	}
}
