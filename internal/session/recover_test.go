package session_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// TestRecoverCancelsEveryLostCall: two sessions crashed with a turn in
// flight each, and their models used the same tool call ids: at restart
// every pending or running call of both turns is marked cancelled, with
// a tool.failed (cancelled) each that the turn's turn.cancelled lists,
// and a call that had completed stays completed.
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
	// Each lost call got tool.failed (cancelled), and its turn's
	// turn.cancelled lists them, as a live cancel does.
	for _, sid := range []string{a, b} {
		evs, err := h2.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid},
			Types: []event.Type{event.ToolFailed, event.TurnCancelled}})
		servertest.Must(t, err)
		var failed []string
		for _, ev := range evs[:len(evs)-1] {
			var p protocol.ToolFailedPayload
			servertest.Must(t, ev.DecodePayload(&p))
			if ev.Type != event.ToolFailed || p.ErrorClass != "cancelled" || p.Started != (p.ToolUseID == "call_1") {
				t.Errorf("%s: %s %s, want tool.failed (cancelled, started only for the running call)", sid, ev.Type, ev.Payload)
			}
			failed = append(failed, p.ToolUseID)
		}
		var end protocol.TurnCancelledPayload
		servertest.Must(t, evs[len(evs)-1].DecodePayload(&end))
		if len(failed) != 4 || !slices.Equal(end.CancelledToolUseIDs, failed) {
			t.Errorf("%s: tool.failed for %v, turn.cancelled lists %v; want the 4 lost calls in both", sid, failed, end.CancelledToolUseIDs)
		}
	}
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

// TestRecoverEndsTheOpenModelCall (issue 20, item 5): a turn that a
// crash left inside a model call gets llm.call_failed (cancelled, actor
// session, the call's message id and model) before its turn.cancelled,
// so the trace shows how every call ended; a call that had ended gets
// nothing more, and neither does another session's turn.
func TestRecoverEndsTheOpenModelCall(t *testing.T) {
	h := servertest.Start(t, "")
	a, b := h.CreateSession(), h.CreateSession()
	ctx := context.Background()
	emit := func(sid string, typ event.Type, turn string, p any, ops ...store.Op) {
		t.Helper()
		em, err := h.Server.Bus.Emitter(ctx, sid)
		servertest.Must(t, err)
		_, err = em.EmitWait(ctx, bus.Spec{Type: typ, TurnID: turn, Actor: event.ActorAgent, Payload: p, Ops: ops})
		servertest.Must(t, err)
	}
	for _, sid := range []string{a, b} {
		turn := "turn_crashed_" + sid
		emit(sid, event.TurnStarted, turn, map[string]any{}, store.PutTurn{Turn: store.Turn{ID: turn, SessionID: sid, Status: store.TurnInFlight, StartedAt: time.Now()}})
		emit(sid, event.LLMCallStarted, turn, protocol.LLMCallStartedPayload{MessageID: "msg_first_" + sid, Model: "builtin:demo"})
		emit(sid, event.LLMCallCompleted, turn, protocol.LLMCallCompletedPayload{MessageID: "msg_first_" + sid, Model: "builtin:demo", StopReason: "tool_use"})
		if sid == a { // b's turn crashed between calls
			emit(sid, event.LLMCallStarted, turn, protocol.LLMCallStartedPayload{MessageID: "msg_open", Model: "builtin:demo", CallIndex: 1})
		}
	}
	h.Stop()

	h2 := servertest.Start(t, h.Home)
	for _, sid := range []string{a, b} {
		evs, err := h2.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid},
			Types: []event.Type{event.LLMCallFailed, event.TurnCancelled}})
		servertest.Must(t, err)
		var types []event.Type
		for _, ev := range evs {
			types = append(types, ev.Type)
		}
		want := []event.Type{event.TurnCancelled}
		if sid == a {
			want = []event.Type{event.LLMCallFailed, event.TurnCancelled}
			var p protocol.LLMCallFailedPayload
			servertest.Must(t, evs[0].DecodePayload(&p))
			if p.MessageID != "msg_open" || p.Model != "builtin:demo" || p.ErrorClass != "cancelled" || evs[0].Actor != event.ActorSession || evs[0].TurnID != "turn_crashed_"+sid {
				t.Errorf("llm.call_failed %s by %s, want the open call msg_open cancelled, by the session manager", evs[0].Payload, evs[0].Actor)
			}
		}
		if !slices.Equal(types, want) {
			t.Errorf("%s: recovery stored %v, want %v", sid, types, want)
		}
	}
}
