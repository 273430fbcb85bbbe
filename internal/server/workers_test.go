package server_test

import (
	"context"
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

func chatTypes() []string {
	all, _ := event.Preset(event.PresetChat)
	out := make([]string, len(all))
	for i, t := range all {
		out[i] = string(t)
	}
	return out
}

func sessionsOf(evs []*protocol.EventEnvelope) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		m[e.SessionID]++
	}
	return m
}

func strictlyIncreasing(t *testing.T, evs []*protocol.EventEnvelope) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID {
			t.Fatalf("ids not increasing at %d: %s then %s (%s, %s)", i, evs[i-1].ID, evs[i].ID, evs[i-1].Type, evs[i].Type)
		}
	}
}

// TestSpec11_1_12_WorkerHiddenVsIncluded: the same planner session seen
// with include_worker_sessions false and true: worker events (nested
// ones included) appear only in the second, interleaved in id order,
// live and on replay.
func TestSpec11_1_12_WorkerHiddenVsIncluded(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	hidden := streamtest.Attach(t, h.URL, sid)
	hidden.Subscribe(protocol.Filter{EventTypes: chatTypes()}, nil, false)
	hidden.Read(wait)
	shown := streamtest.Attach(t, h.URL, sid)
	shown.Subscribe(protocol.Filter{EventTypes: chatTypes(), IncludeWorkerSessions: true}, nil, false)
	shown.Read(wait)

	turn := h.Submit(sid, delegateCmd(delegateCmd("/echo from the nested worker")))
	hev := hidden.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	sev := shown.Events(wait, func(e *protocol.EventEnvelope) bool {
		return e.Type == "turn.completed" && e.SessionID == sid && e.TurnID != nil && *e.TurnID == turn
	})
	if got := sessionsOf(hev); len(got) != 1 || got[sid] == 0 {
		t.Fatalf("hidden stream carried sessions %v", got)
	}
	got := sessionsOf(sev)
	if len(got) != 3 {
		t.Fatalf("included stream carried sessions %v, want the planner and two workers", got)
	}
	strictlyIncreasing(t, sev)
	var plannerOnly []*protocol.EventEnvelope
	for _, e := range sev {
		if e.SessionID == sid {
			plannerOnly = append(plannerOnly, e)
		}
	}
	if !slices.Equal(types(plannerOnly), types(hev)) {
		t.Fatalf("planner events differ between the two streams:\n%v\n%v", types(plannerOnly), types(hev))
	}
	// A worker's text reached the included stream.
	text := ""
	for _, e := range sev {
		if e.SessionID != sid && e.Type == "text.delta" {
			text += payloadOf(t, e)["text"].(string)
		}
	}
	if text == "" {
		t.Fatal("no worker text.delta on the included stream")
	}

	// Replay both ways from the turn's start.
	h.WaitTurn(sid)
	first, _ := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.TurnStarted}})
	since := first[len(first)-1].ID
	for _, include := range []bool{false, true} {
		c := streamtest.Attach(t, h.URL, sid)
		c.Subscribe(protocol.Filter{EventTypes: chatTypes(), IncludeWorkerSessions: include}, &since, false)
		ack := c.Read(wait)
		if ack.Ack == nil {
			t.Fatalf("ack: %s", ack.Raw)
		}
		evs := c.Events(wait, func(e *protocol.EventEnvelope) bool {
			return e.Type == "turn.completed" && e.SessionID == sid
		})
		strictlyIncreasing(t, evs)
		if n := len(sessionsOf(evs)); (include && n != 3) || (!include && n != 1) {
			t.Fatalf("replay include=%v carried %d sessions", include, n)
		}
		if ack.Ack.ReplayEventCount != len(evs) {
			t.Fatalf("replay include=%v: ack says %d, got %d", include, ack.Ack.ReplayEventCount, len(evs))
		}
		want := hev[1:]
		if include {
			want = sev[1:]
		}
		if !slices.Equal(ids(evs), ids(want)) {
			t.Fatalf("replay include=%v differs from the live stream", include)
		}
	}
}

func ids(evs []*protocol.EventEnvelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}
