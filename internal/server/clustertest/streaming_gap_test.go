package clustertest_test

// The streaming_gap case of a replay (docs/protocol.md §10) over
// nodes: streaming events expire from the log after --streaming-ttl,
// and a node that did not relay them answers a cursor before them as a
// single node answers one whose deltas its ring let go.

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/natstest"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// gapTTL is the nodes' --streaming-ttl in this test: the smallest the
// log keeps but one, so a delta relayed live is not lost to a feed
// that lags a second behind on a loaded machine.
const gapTTL = 2 * time.Second

// waitStreamingExpired waits until the log holds no streaming event of
// tree any more, as its stream's leader answers.
func (tr *trio) waitStreamingExpired(t *testing.T, tree string) {
	t.Helper()
	nc, _ := natstest.Connect(t, tr.nats.URLs())
	ctx, cancel := context.WithTimeout(t.Context(), specRead+2*gapTTL)
	defer cancel()
	lg := openLog(t, ctx, nc)
	for {
		evs, _, err := lg.Streaming(ctx, tree, math.MaxUint64)
		if err != nil {
			t.Fatalf("the streaming events of %s in the log: %v", tree, err)
		}
		if len(evs) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the log still holds %d streaming events of %s after %s", len(evs), tree, specRead+2*gapTTL)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// catalogOf is the catalog types of set.
func catalogOf(set map[string]bool) map[string]bool {
	out := map[string]bool{}
	for typ := range set {
		if event.FamilyOf(event.Type(typ)) == event.Catalog {
			out[typ] = true
		}
	}
	return out
}

// replayOf reads the n replayed events that follow an ack.
func replayOf(t *testing.T, c streamtest.Conn, n int) []*protocol.EventEnvelope {
	t.Helper()
	evs := make([]*protocol.EventEnvelope, 0, n)
	for len(evs) < n {
		f := nextFrame(t, c)
		if f.Event == nil {
			t.Fatalf("%s client: want a replayed event, got %s", c.Transport(), f.Raw)
		}
		evs = append(evs, f.Event)
	}
	return evs
}

// TestClusterExpiredDeltasReplayAsStreamingGap: a turn streams on the
// owner; once its deltas expired from the log (--streaming-ttl), a
// client of a node that never relayed them resumes with a cursor taken
// on the owner before them (or on one of them): the ack says
// streaming_gap, and the replay holds every catalog event the filter
// matches after the cursor, exactly the owner's, and no delta, as a
// single node answers when its ring let the deltas go. A filter of
// catalog types only, and a cursor after the turn's model calls, get
// no gap. The client then follows the next turn live.
func TestClusterExpiredDeltasReplayAsStreamingGap(t *testing.T) {
	tri := startTrio(t, func(c *config.Config) { c.StreamingTTL = gapTTL })
	chat := streamtest.PresetTypes(event.PresetChat)
	chatCatalog := catalogOf(chat)
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		sid := tri.session()
		ref, ack, _ := subscribe(t, tr, tri.owner(), sid, "preset:chat", nil, false)
		before := ack.SeamEventID
		t1 := tri.owner().Submit(sid, "/long 30")
		turn1, _ := readUntil(t, ref, event.TurnCompleted, t1)
		var deltas []string
		for _, e := range turn1 {
			if e.Type == string(event.TextDelta) {
				deltas = append(deltas, e.ID)
			}
		}
		if len(deltas) < 2 {
			t.Fatalf("turn %s streamed %d deltas", t1, len(deltas))
		}
		delta := deltas[len(deltas)/2] // a cursor in the middle of the answer
		ended := turn1[len(turn1)-1].ID
		tri.waitStreamingExpired(t, sid)

		// Each cursor on a node that never followed the tree, then on
		// the same node again (its feed now runs: the rings hold what
		// the log held, nothing).
		cases := []struct {
			what   string
			node   *servertest.Harness
			filter any
			set    map[string]bool
			since  string
			gap    bool
		}{
			{"node 1, a cursor before the turn", tri.nodes[1], "preset:chat", chatCatalog, before, true},
			{"node 1, catalog types only", tri.nodes[1], protocol.Filter{EventTypes: []string{"turn.started", "llm.call_completed", "turn.completed"}},
				map[string]bool{"turn.started": true, "llm.call_completed": true, "turn.completed": true}, before, false},
			{"node 2, a cursor on an expired delta", tri.nodes[2], "preset:chat", chatCatalog, delta, true},
			{"node 2, a cursor at the turn's end", tri.nodes[2], "preset:chat", chatCatalog, ended, false},
			{"node 1, a cursor on an expired delta", tri.nodes[1], "preset:chat", chatCatalog, delta, true},
		}
		var gapped streamtest.Conn // the first client, kept for the next turn
		var seam string
		for i, c := range cases {
			cl, ack, _ := subscribe(t, tr, c.node, sid, c.filter, ptr(c.since), false)
			if ack.StreamingGap != c.gap {
				t.Fatalf("%s: streaming_gap %v, want %v (ack %+v)", c.what, ack.StreamingGap, c.gap, ack)
			}
			replay := replayOf(t, cl, ack.ReplayEventCount)
			streamtest.SameIDs(t, c.what, replay, tri.ownerDelivered(sid, c.since, ack.SeamEventID, c.set))
			if i == 0 {
				gapped, seam = cl, ack.SeamEventID
				if streamtest.CountType(replay, event.TurnCompleted) != 1 {
					t.Fatalf("%s: the replay of %d events does not end turn %s", c.what, len(replay), t1)
				}
				continue
			}
			cl.Close()
		}

		// The gapped client follows the next turn live, from its seam.
		t2 := tri.nodes[2].Submit(sid, "/echo after the gap")
		live, _ := readUntil(t, gapped, event.TurnCompleted, t2)
		streamtest.CheckIncreasing(t, "node 1's gapped client after its seam", live, seam)
		var catalog []*protocol.EventEnvelope
		for _, e := range live {
			if chatCatalog[e.Type] {
				catalog = append(catalog, e)
			}
		}
		streamtest.SameIDs(t, "node 1's gapped client, live", catalog, tri.ownerDelivered(sid, seam, live[len(live)-1].ID, chatCatalog))
		gapped.Close()
		ref.Close()
	})
}
