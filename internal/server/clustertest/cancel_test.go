package clustertest_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
)

// TestCancelSentToANonOwnerCancelsTheTurn: a turn runs on node A (a
// shell command that would sleep for minutes); a cancel sent to node B
// over its REST API reaches A and cancels it, every client sees
// turn.cancelled, and cancelling again, through B's REST API or a
// cancel frame on B's stream, is idempotent.
func TestCancelSentToANonOwnerCancelsTheTurn(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, onB := attach(t, a, sid), attach(t, b, sid)

	turn := b.Submit(sid, `/tool shell {"command": "exec sleep 300"}`)
	onB.Events(wait, streamtest.UntilType(event.ToolCalled, turn))

	// The owner's refusal comes back through node b as the API gives it.
	var refusal struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if st := b.Do(http.MethodPost, "/sessions/"+sid+"/turns", map[string]string{"content": "another"}, &refusal); st != http.StatusConflict || refusal.Error.Code != "turn_in_flight" {
		t.Fatalf("a second turn submitted to node b: %d %+v, want 409 turn_in_flight", st, refusal)
	}

	var res struct {
		TurnID string `json:"turn_id"`
		Status string `json:"status"`
	}
	if st := b.Do(http.MethodPost, "/sessions/"+sid+"/turns/"+turn+"/cancel", map[string]string{"reason": "user_cancel"}, &res); st != http.StatusAccepted || res.Status != "cancelling" {
		t.Fatalf("cancel on node b: %d %+v, want 202 cancelling", st, res)
	}
	endB := onB.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	endA := onA.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	if last := endB[len(endB)-1]; last.ID != endA[len(endA)-1].ID {
		t.Fatalf("turn.cancelled differs: node b %s, node a %s", last.ID, endA[len(endA)-1].ID)
	}
	a.WaitTurn(sid)

	// Again, through node b's REST API and its stream: nothing more
	// happens, and the answer says so.
	if st := b.Do(http.MethodPost, "/sessions/"+sid+"/turns/"+turn+"/cancel", map[string]string{"reason": "user_cancel"}, &res); st != http.StatusAccepted || res.Status != "already_cancelling" {
		t.Fatalf("second cancel on node b: %d %+v, want 202 already_cancelling", st, res)
	}
	onB.Send(map[string]any{"type": "cancel", "turn_id": turn, "reason": "user_cancel"})
	// Both repeated cancels reached the owner, whose session manager
	// answered each as redundant (a bus.handler_warning on the session),
	// and every client sees those warnings.
	redundant := func(evs []*event.Event) int {
		n := 0
		for _, e := range evs {
			if e.Type == event.BusHandlerWarning && bytes.Contains(e.Payload, []byte("redundant_cancel")) {
				n++
			}
		}
		return n
	}
	servertest.WaitFor(t, "two redundant cancels on node a", func() bool { return redundant(a.Live.Events(sid)) == 2 })
	servertest.WaitFor(t, "two redundant cancels relayed to node b", func() bool { return redundant(b.Live.Events(sid)) == 2 })
	if st, err := b.Server.Store.Turn(t.Context(), turn); err != nil || st.Status != store.TurnCancelled {
		t.Fatalf("node b's projection of the turn: %+v, %v", st, err)
	}
	n := 0
	for _, e := range a.Live.Events(sid) {
		if e.Type == event.TurnCancelled {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("node a delivered %d turn.cancelled, want 1", n)
	}
}
