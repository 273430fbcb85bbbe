package session_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
)

// TestCancelAnswerMatchesTheEnd: a cancel racing with the turn's end is
// answered with what then happens: "cancelling" only for a turn that ends
// cancelled, "already_ended" only for one that completed. The cancels
// land at random moments of short turns, many times, so a good share
// arrive as the turn is ending.
func TestCancelAnswerMatchesTheEnd(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx := context.Background()
	const iterations = 300
	// Calibrate the delays on how long a turn takes here.
	start := time.Now()
	h.Submit(sid, "/echo calibrate")
	h.WaitTurn(sid)
	span := max(time.Since(start), 200*time.Microsecond)
	counts := map[session.CancelResult]int{}
	for i := range iterations {
		turn, err := h.Server.Sessions.Submit(ctx, sid, "/echo hi")
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		d := rand.N(span * 3 / 2)
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) { // spin: sleeps are too coarse
		}
		r, err := h.Server.Sessions.Cancel(ctx, sid, turn, "")
		if err != nil {
			t.Fatalf("iteration %d: cancel: %v", i, err)
		}
		counts[r]++
		h.WaitTurn(sid)
		row, err := h.Server.Store.Turn(ctx, turn)
		servertest.Must(t, err)
		want := map[session.CancelResult]store.TurnStatus{session.Cancelling: store.TurnCancelled, session.AlreadyEnded: store.TurnCompleted}[r]
		if row.Status != want {
			t.Fatalf("iteration %d (cancel after %v): answered %q but the turn ended %q", i, d, r, row.Status)
		}
	}
	t.Logf("answers over %d races (turn ≈ %v): %v", iterations, span, counts)
}
