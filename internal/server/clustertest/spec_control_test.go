package clustertest_test

// Spec §11.1 items 7, 10 and 12 over three nodes: a cancel sent to one
// node, seen the same way by every node's clients, and a delegation
// tree seen from nodes that do not own it.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestCluster11_1_10_CancelOnOneNodeSeenByEveryNode: a long answer
// streams on the owner (submitted to node 1); a client of node 2
// cancels it twice (cancel frames on the WebSocket; POST …/cancel to
// node 2 beside an SSE stream, answered cancelling then
// already_cancelling). The turn is cancelled once (§6.2.1, §11.1.7:
// message.complete cancelled with the partial text, llm.call_failed
// cancelled, turn.cancelled, no tool.failed), the clients of all three
// nodes get byte-identical frames for the turn, and the redundant
// cancel is one bus.handler_warning, which reaches every node.
func TestCluster11_1_10_CancelOnOneNodeSeenByEveryNode(t *testing.T) {
	tri := startTrio(t, withQueue(100_000))
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		sid := tri.session()
		var clients []streamtest.Conn
		for _, h := range tri.nodes {
			c, _, _ := subscribe(t, tr, h, sid, "preset:full", nil, false)
			clients = append(clients, c)
		}
		turn := tri.nodes[1].Submit(sid, "/long 400")
		canceller := clients[2]
		var seen []*protocol.EventEnvelope
		for streamtest.CountType(seen, event.TextDelta) < 5 {
			seen = append(seen, canceller.Events(specRead, func(*protocol.EventEnvelope) bool { return true })...)
		}
		const reason = "user_pressed_ctrl_c"
		for _, want := range []string{"cancelling", "already_cancelling"} {
			if ws, ok := canceller.(*streamtest.Client); ok {
				ws.Send(map[string]string{"type": protocol.TypeCancel, "turn_id": turn, "reason": reason})
				continue
			}
			var r struct {
				Status string `json:"status"`
			}
			if st := tri.nodes[2].Do(http.MethodPost, "/sessions/"+sid+"/turns/"+turn+"/cancel", map[string]string{"reason": reason}, &r); st != http.StatusAccepted || r.Status != want {
				t.Fatalf("cancel on node 2: %d %q, want 202 %q", st, r.Status, want)
			}
		}

		var frames [][]byte // node 0's frames of the turn
		for i, c := range clients {
			node := tri.nodes[i].Config.Node
			evs, raw := readUntil(t, c, event.TurnCancelled, turn)
			if i == 2 {
				evs = append(seen, evs...)
			}
			checkCancellation(t, node+"'s client", evs, turn)
			var own []*protocol.EventEnvelope
			var ownRaw [][]byte
			for k, e := range evs {
				if e.TurnID != nil && *e.TurnID == turn {
					own = append(own, e)
					if i < 2 {
						ownRaw = append(ownRaw, raw[k])
					}
				}
			}
			end := own[len(own)-1].ID
			tri.ownerDelivered(sid, "", end, nil) // the recorder has caught up
			var want []string
			for _, e := range tri.owner().Live.Events(sid) {
				if e.TurnID == turn && e.ID <= end {
					want = append(want, e.ID)
				}
			}
			if !slices.Equal(streamtest.IDs(own), want) {
				t.Fatalf("%s's client: %d events of the turn, the owner delivered %d", node, len(own), len(want))
			}
			switch i {
			case 0:
				frames = ownRaw
			case 1:
				if !sameFrames(ownRaw, frames) {
					t.Fatalf("the turn's frames differ between node 1 (%d) and node 0 (%d)", len(ownRaw), len(frames))
				}
			}
		}
		tri.owner().WaitTurn(sid)

		// One cancellation, one warning for the redundant cancel.
		owner := tri.owner()
		stored := func(typ event.Type) []*event.Event {
			evs, err := owner.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{typ}})
			servertest.Must(t, err)
			return evs
		}
		if n := len(stored(event.TurnCancelled)); n != 1 {
			t.Fatalf("%d turn.cancelled stored", n)
		}
		redundant := func(evs []*event.Event) int {
			n := 0
			for _, e := range evs {
				if e.Type == event.BusHandlerWarning && bytes.Contains(e.Payload, []byte(`"redundant_cancel"`)) {
					n++
				}
			}
			return n
		}
		eventually(t, "the redundant-cancel warning", func() bool { return redundant(stored(event.BusHandlerWarning)) == 1 })
		for _, h := range tri.nodes[1:] {
			eventually(t, "the warning relayed to "+h.Config.Node, func() bool { return redundant(h.Live.Events(sid)) == 1 })
		}
		if st, err := tri.nodes[2].Server.Store.Turn(context.Background(), turn); err != nil || st.Status != store.TurnCancelled {
			t.Fatalf("node 2's projection of the turn: %+v, %v", st, err)
		}
	})
}

// checkCancellation checks a client's view of a cancellation during
// the model's streaming (§6.2.1): message.complete with stop_reason
// cancelled and the partial text its deltas gave, then llm.call_failed
// with error_class cancelled, then turn.cancelled; no tool.failed.
func checkCancellation(t *testing.T, what string, evs []*protocol.EventEnvelope, turn string) {
	t.Helper()
	var partial strings.Builder
	var order []string
	var complete struct {
		StopReason   string `json:"stop_reason"`
		FinalContent []struct {
			Text string `json:"text"`
		} `json:"final_content"`
	}
	for _, e := range evs {
		if e.TurnID == nil || *e.TurnID != turn {
			continue
		}
		switch event.Type(e.Type) {
		case event.TextDelta:
			var d struct {
				Text string `json:"text"`
			}
			servertest.Must(t, json.Unmarshal(e.Payload, &d))
			partial.WriteString(d.Text)
		case event.MessageComplete:
			servertest.Must(t, json.Unmarshal(e.Payload, &complete))
			order = append(order, e.Type)
		case event.LLMCallFailed:
			var p struct {
				ErrorClass string `json:"error_class"`
			}
			servertest.Must(t, json.Unmarshal(e.Payload, &p))
			if p.ErrorClass != "cancelled" {
				t.Fatalf("%s: llm.call_failed error_class %q", what, p.ErrorClass)
			}
			order = append(order, e.Type)
		case event.TurnCancelled, event.ToolFailed, event.TurnCompleted:
			order = append(order, e.Type)
		}
	}
	if !slices.Equal(order, []string{"message.complete", "llm.call_failed", "turn.cancelled"}) {
		t.Fatalf("%s: cancellation sequence %v", what, order)
	}
	if complete.StopReason != "cancelled" || len(complete.FinalContent) != 1 || complete.FinalContent[0].Text != partial.String() || partial.Len() == 0 {
		t.Fatalf("%s: message.complete %+v; the deltas gave %d bytes", what, complete, partial.Len())
	}
}

// TestCluster11_1_12_WorkerHiddenVsIncludedOnNonOwners: a planner
// delegates to a worker that delegates again; on each of nodes 1 and 2,
// one client hides the workers and one includes them. The hidden
// streams carry the planner's events only, exactly those the owner
// delivered; the included streams carry the planner and both workers,
// interleaved in id order, the same on both nodes; the planner's part
// of them is the hidden stream. Replayed from the turn's start on node
// 2, once its live clients are gone (a cold feed), both filters give
// what they gave live.
func TestCluster11_1_12_WorkerHiddenVsIncludedOnNonOwners(t *testing.T) {
	tri := startTrio(t, withQueue(100_000))
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		sid := tri.session()
		chat := streamtest.PresetFilter(event.PresetChat)
		type pair struct{ hidden, shown streamtest.Conn }
		var pairs []pair
		for _, h := range tri.nodes[1:] {
			hidden, _, _ := subscribe(t, tr, h, sid, chat(false), nil, false)
			shown, _, _ := subscribe(t, tr, h, sid, chat(true), nil, false)
			pairs = append(pairs, pair{hidden, shown})
		}
		turn := tri.nodes[2].Submit(sid, streamtest.DelegateCmd(streamtest.DelegateCmd("/echo from the nested worker")))
		plannerEnd := func(e *protocol.EventEnvelope) bool {
			return e.SessionID == sid && streamtest.UntilType(event.TurnCompleted, turn)(e)
		}
		var hev, sev []*protocol.EventEnvelope
		for i, p := range pairs {
			node := tri.nodes[i+1].Config.Node
			h := p.hidden.Events(specRead, plannerEnd)
			s := p.shown.Events(specRead, plannerEnd)
			if got := streamtest.SessionsOf(h); len(got) != 1 || got[sid] == 0 {
				t.Fatalf("%s: the hidden stream carried sessions %v", node, got)
			}
			if got := streamtest.SessionsOf(s); len(got) != 3 {
				t.Fatalf("%s: the included stream carried sessions %v, want the planner and two workers", node, got)
			}
			streamtest.CheckIncreasing(t, node+"'s included stream", s, "")
			var planner []*protocol.EventEnvelope
			for _, e := range s {
				if e.SessionID == sid {
					planner = append(planner, e)
				}
			}
			if !slices.Equal(streamtest.IDs(planner), streamtest.IDs(h)) {
				t.Fatalf("%s: the planner's events differ between the two streams", node)
			}
			tri.sameAsOwner(node+"'s hidden stream", sid, "", h, streamtest.PresetTypes(event.PresetChat))
			if i == 0 {
				hev, sev = h, s
				continue
			}
			if !slices.Equal(streamtest.IDs(h), streamtest.IDs(hev)) || !slices.Equal(streamtest.IDs(s), streamtest.IDs(sev)) {
				t.Fatalf("nodes 1 and 2 differ: hidden %d and %d events, included %d and %d", len(hev), len(h), len(sev), len(s))
			}
			p.hidden.Close()
			p.shown.Close()
		}
		tri.owner().WaitTurn(sid)
		since := firstOf(t, tri.owner(), sid, event.TurnStarted, turn)
		for _, include := range []bool{false, true} {
			c, ack, _ := subscribe(t, tr, tri.nodes[2], sid, chat(include), &since, false)
			evs := c.Events(specRead, plannerEnd)
			want := hev[1:]
			if include {
				want = sev[1:]
			}
			if ack.ReplayEventCount != len(evs) || ack.StreamingGap || !slices.Equal(streamtest.IDs(evs), streamtest.IDs(want)) {
				t.Fatalf("replay on node 2, include=%v: ack %+v, %d events, the live stream had %d after turn.started", include, ack, len(evs), len(want))
			}
			c.Close()
		}
	})
}
