package session_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func slow(c *config.Config) { c.DemoDelay = 5 * time.Millisecond }

func count(evs []*event.Event, t event.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == t {
			n++
		}
	}
	return n
}

func waitDelta(t *testing.T, h *servertest.Harness, sid string) {
	servertest.WaitFor(t, "a text delta", func() bool { return count(h.Live.Events(sid), event.TextDelta) > 0 })
}

// TestSpec11_1_10_IdempotentCancel: two cancels of one turn give one
// cancellation; the second yields only a bus.handler_warning.
func TestSpec11_1_10_IdempotentCancel(t *testing.T) {
	h := servertest.Start(t, "", slow)
	sid := h.CreateSession()
	turn := h.Submit(sid, "/long 400")
	waitDelta(t, h, sid)
	ctx := context.Background()
	r1, err := h.Server.Sessions.Cancel(ctx, sid, turn, "user_cancel")
	if err != nil || r1 != session.Cancelling {
		t.Fatalf("first cancel: %v %v", r1, err)
	}
	r2, err := h.Server.Sessions.Cancel(ctx, sid, turn, "user_cancel")
	if err != nil || r2 != session.AlreadyCancelling {
		t.Fatalf("second cancel: %v %v", r2, err)
	}
	h.WaitTurn(sid)
	r3, err := h.Server.Sessions.Cancel(ctx, sid, turn, "user_cancel")
	if err != nil || r3 != session.AlreadyCancelling {
		t.Fatalf("cancel after the end: %v %v", r3, err)
	}
	servertest.WaitFor(t, "two warnings", func() bool { return count(h.Live.Events(sid), event.BusHandlerWarning) == 2 })
	evs := h.Live.Events(sid)
	if n := count(evs, event.TurnCancelled); n != 1 {
		t.Fatalf("%d turn.cancelled events", n)
	}
	if n := count(evs, event.LLMCallFailed); n != 1 {
		t.Fatalf("%d llm.call_failed events", n)
	}
	turnRow, _ := h.Server.Store.Turn(ctx, turn)
	if turnRow.Status != store.TurnCancelled || turnRow.Reason != "user_cancel" {
		t.Errorf("turn row %+v", turnRow)
	}
}

// TestTurnTimeoutCancels: --turn-timeout cancels with reason turn_timeout.
func TestTurnTimeoutCancels(t *testing.T) {
	h := servertest.Start(t, "", slow, func(c *config.Config) { c.TurnTimeout = 50 * time.Millisecond })
	sid := h.CreateSession()
	h.Submit(sid, "/long 1000")
	h.WaitTurn(sid)
	evs := h.Live.Events(sid)
	last := evs[len(evs)-1]
	var p map[string]any
	json.Unmarshal(last.Payload, &p)
	if last.Type != event.TurnCancelled || p["reason"] != "turn_timeout" {
		t.Fatalf("last event %s %v", last.Type, p)
	}
}

// TestShutdownCancelsInFlightTurns: shutdown ends turns with reason
// server_shutdown, persisted, and later submits are refused.
func TestShutdownCancelsInFlightTurns(t *testing.T) {
	h := servertest.Start(t, "", slow)
	sid := h.CreateSession()
	turn := h.Submit(sid, "/long 1000")
	waitDelta(t, h, sid)
	h.Stop()
	h2 := servertest.Start(t, h.Home)
	evs, err := h2.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.TurnCancelled}})
	servertest.Must(t, err)
	if len(evs) != 1 || evs[0].TurnID != turn {
		t.Fatalf("turn.cancelled after shutdown: %v", servertest.Types(evs))
	}
	var p map[string]any
	json.Unmarshal(evs[0].Payload, &p)
	if p["reason"] != "server_shutdown" {
		t.Fatalf("reason %v", p["reason"])
	}
	if _, err := h.Server.Sessions.Submit(context.Background(), sid, "again"); err == nil {
		t.Fatal("submit accepted after shutdown")
	}
}

// TestRecoverClosesTurnsLeftOpen: a turn the store shows in flight at
// start (a crash) is closed with turn.cancelled(server_restart), after
// tool.failed for its running call.
func TestRecoverClosesTurnsLeftOpen(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx := context.Background()
	servertest.Must(t, h.Server.Store.Apply(ctx,
		store.PutTurn{Turn: store.Turn{ID: "turn_crashed", SessionID: sid, Status: store.TurnInFlight, StartedAt: time.Now()}},
		store.PutToolCall{Call: store.ToolCall{ID: "tu_run", SessionID: sid, TurnID: "turn_crashed", Name: "list_dir", Status: store.ToolRunning}}))
	h.Stop()
	h2 := servertest.Start(t, h.Home)
	tr, _ := h2.Server.Store.Turn(ctx, "turn_crashed")
	tc, _ := h2.Server.Store.ToolCall(ctx, sid, "", "tu_run")
	if tr.Status != store.TurnCancelled || tr.Reason != "server_restart" || tc.Status != store.ToolCancelled {
		t.Fatalf("turn %+v tool %+v", tr, tc)
	}
	evs, _ := h2.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}})
	if got := servertest.Types(evs); !slices.Equal(got, []event.Type{event.SessionCreated, event.ToolFailed, event.TurnCancelled}) {
		t.Fatalf("events %v", got)
	}
}

// TestCostAccumulator: turn_count and cost_so_far_usd follow the events,
// exactly once across a restart.
func TestCostAccumulator(t *testing.T) {
	priced := func(c *config.Config) {
		c.Prices = map[string]price.Price{"builtin:demo": {Input: 1000, Output: 2000}}
	}
	h := servertest.Start(t, "", priced)
	sid := h.CreateSession()
	ctx := context.Background()
	for range 3 {
		h.Submit(sid, "/echo hi")
		h.WaitTurn(sid)
	}
	servertest.WaitFor(t, "turn_count 3", func() bool {
		s, _ := h.Server.Store.Session(ctx, sid)
		return s.TurnCount == 3
	})
	h.Stop()
	h2 := servertest.Start(t, h.Home, priced)
	h2.Submit(sid, "/echo again")
	h2.WaitTurn(sid)
	servertest.WaitFor(t, "turn_count 4", func() bool {
		s, _ := h2.Server.Store.Session(ctx, sid)
		return s.TurnCount == 4
	})
	calls, _ := h2.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.LLMCallCompleted}})
	want := 0.0
	for _, e := range calls {
		var p struct {
			Usage struct {
				CostUSD float64 `json:"cost_usd"`
			} `json:"usage"`
		}
		json.Unmarshal(e.Payload, &p)
		want += p.Usage.CostUSD
	}
	if len(calls) != 4 || want <= 0 {
		t.Fatalf("%d llm.call_completed costing %v, want 4 with a cost", len(calls), want)
	}
	// The accumulator is a subscriber: its update for the last call may
	// land after the turn's row (a loaded machine). Wait for the sum,
	// then make sure no double count follows.
	servertest.WaitFor(t, "cost_so_far_usd to reach the sum of the calls", func() bool {
		s, _ := h2.Server.Store.Session(ctx, sid)
		return math.Abs(s.CostUSD-want) <= 1e-9
	})
	time.Sleep(100 * time.Millisecond) // a double count would land by now
	s, _ := h2.Server.Store.Session(ctx, sid)
	if s.TurnCount != 4 {
		t.Fatalf("turn_count %d after restart, want 4", s.TurnCount)
	}
	if math.Abs(s.CostUSD-want) > 1e-9 {
		t.Fatalf("cost_so_far_usd %v, want %v over %d calls", s.CostUSD, want, len(calls))
	}
}

// TestSubmitRightAfterTurnEnd: a client that sees a turn's terminal
// event may send the next message at once; it must be admitted, not
// refused with 409, while the ended turn winds down.
func TestSubmitRightAfterTurnEnd(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx := context.Background()
	for i := range 40 {
		if _, err := h.Server.Sessions.Submit(ctx, sid, "/echo hi"); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		servertest.WaitFor(t, "turn.completed", func() bool { return count(h.Live.Events(sid), event.TurnCompleted) == i+1 })
	}
	h.WaitTurn(sid)
}

// TestCancelRightAfterTurnEnd: a cancel sent by a client that has seen
// the turn's terminal event is answered already_ended, never
// "cancelling", even while the turn winds down in memory.
func TestCancelRightAfterTurnEnd(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx := context.Background()
	for i := range 40 {
		turn, err := h.Server.Sessions.Submit(ctx, sid, "/echo hi")
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		servertest.WaitFor(t, "turn.completed", func() bool { return count(h.Live.Events(sid), event.TurnCompleted) == i+1 })
		if r, err := h.Server.Sessions.Cancel(ctx, sid, turn, ""); err != nil || r != session.AlreadyEnded {
			t.Fatalf("turn %d: cancel after its end: %v %v", i, r, err)
		}
	}
	h.WaitTurn(sid)
}
