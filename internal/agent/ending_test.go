package agent_test

import (
	"context"
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/store"
)

// TestCancelAtTheEndWins: a cancel that lands after the model's last
// call but before the turn's end is fixed (Turn.Ending) ends the turn
// cancelled, phase between_calls, never completed.
func TestCancelAtTheEndWins(t *testing.T) {
	r := newRig(t, script{deltas: textDeltas(3), result: model.Result{StopReason: model.StopEndTurn}})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var asked []store.TurnStatus
	r.ending = func(st store.TurnStatus) string {
		asked = append(asked, st)
		if st == store.TurnCompleted {
			cancel(&agent.CancelCause{Reason: "user_cancel"})
			return "user_cancel"
		}
		return ""
	}
	out, evs := r.run(ctx, "fake:m")
	if out.Status != store.TurnCancelled || out.Reason != "user_cancel" {
		t.Fatalf("outcome %+v", out)
	}
	if len(find(evs, event.TurnCompleted)) != 0 || len(find(evs, event.TurnCancelled)) != 1 {
		t.Fatalf("events %v", types(evs))
	}
	if p := payload(t, find(evs, event.TurnCancelled)[0]); p["phase"] != "between_calls" {
		t.Errorf("turn.cancelled %v", p)
	}
	if !slices.Equal(asked, []store.TurnStatus{store.TurnCompleted}) {
		t.Errorf("Ending called with %v", asked)
	}
	row, err := r.st.Turn(context.Background(), evs[0].TurnID)
	if err != nil || row.Status != store.TurnCancelled {
		t.Errorf("turn row %+v %v", row, err)
	}
}

// TestEndingFixedBeforeTheEnd: a turn that completes tells Ending so
// once, with completed, before turn.completed is emitted.
func TestEndingFixedBeforeTheEnd(t *testing.T) {
	r := newRig(t, script{deltas: textDeltas(2), result: model.Result{StopReason: model.StopEndTurn}})
	var asked []store.TurnStatus
	var emittedBefore int
	r.ending = func(st store.TurnStatus) string {
		asked = append(asked, st)
		emittedBefore = len(find(r.rec.Events(r.sid), event.TurnCompleted))
		return ""
	}
	out, evs := r.run(context.Background(), "fake:m")
	if out.Status != store.TurnCompleted || len(find(evs, event.TurnCompleted)) != 1 {
		t.Fatalf("outcome %+v, events %v", out, types(evs))
	}
	if !slices.Equal(asked, []store.TurnStatus{store.TurnCompleted}) || emittedBefore != 0 {
		t.Errorf("Ending called with %v, after %d turn.completed", asked, emittedBefore)
	}
}
