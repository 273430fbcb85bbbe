package spectest_test

import (
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestSpec11_1_12_WorkerHiddenVsIncluded: one planner session seen with
// include_worker_sessions false and true (on SSE:
// include_worker_sessions=true in the query): the events of its workers,
// nested ones included, appear only in the second, interleaved with the
// planner's in id order, live and on replay; the planner's own events
// are the same in both.
func TestSpec11_1_12_WorkerHiddenVsIncluded(t *testing.T) {
	streamtest.EachTransport(t, testWorkerHiddenVsIncluded)
}

func testWorkerHiddenVsIncluded(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	chat := streamtest.PresetFilter(event.PresetChat)
	hidden, _, _ := attachSub(t, tr, h, sid, chat(false), nil, false)
	shown, _, _ := attachSub(t, tr, h, sid, chat(true), nil, false)

	turn := h.Submit(sid, streamtest.DelegateCmd(streamtest.DelegateCmd("/echo from the nested worker")))
	plannerEnd := func(e *protocol.EventEnvelope) bool {
		return e.SessionID == sid && streamtest.UntilType(event.TurnCompleted, turn)(e)
	}
	hev := hidden.Events(readTimeout, plannerEnd)
	sev := shown.Events(readTimeout, plannerEnd)
	if got := streamtest.SessionsOf(hev); len(got) != 1 || got[sid] == 0 {
		t.Fatalf("hidden stream carried sessions %v", got)
	}
	if got := streamtest.SessionsOf(sev); len(got) != 3 {
		t.Fatalf("included stream carried sessions %v, want the planner and two workers", got)
	}
	streamtest.CheckIncreasing(t, "included stream", sev, "")
	var plannerOnly []*protocol.EventEnvelope
	workerText := 0
	for _, e := range sev {
		if e.SessionID == sid {
			plannerOnly = append(plannerOnly, e)
		} else if e.Type == string(event.TextDelta) {
			workerText++
		}
	}
	if !slices.Equal(streamtest.IDs(plannerOnly), streamtest.IDs(hev)) {
		t.Fatalf("planner events differ between the two streams:\n%v\n%v", streamtest.Types(plannerOnly), streamtest.Types(hev))
	}
	if workerText == 0 {
		t.Fatal("no worker text.delta on the included stream")
	}

	// Replay both ways from the turn's start.
	h.WaitTurn(sid)
	since := firstDelivered(t, h, sid, event.TurnStarted, turn).ID
	for _, include := range []bool{false, true} {
		c, ack, _ := attachSub(t, tr, h, sid, chat(include), &since, false)
		evs := c.Events(readTimeout, plannerEnd)
		want := hev[1:]
		if include {
			want = sev[1:]
		}
		if ack.ReplayEventCount != len(evs) || !slices.Equal(streamtest.IDs(evs), streamtest.IDs(want)) {
			t.Fatalf("replay include=%v: ack says %d, got %d events, the live stream had %d after turn.started", include, ack.ReplayEventCount, len(evs), len(want))
		}
	}
}
