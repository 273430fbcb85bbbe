package clustertest_test

// Spec §11.1 item 3 over three nodes: a cursor taken on one node
// resumes on another.

import (
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestCluster11_1_3_ReplayOfACursorTakenOnAnotherNode: a client of
// node 1 drops in the middle of a long answer and reconnects to node 2,
// which has no client of the session (so no feed) until then, with its
// last id; it gets every later event exactly once, the deltas it missed
// included (streaming_gap false: the log holds the turn's deltas), and
// together they are what an uninterrupted client of the owner saw. It
// then drops from node 2 after the turn, another turn runs, and it
// reconnects to node 1 with its new cursor: the replay is exactly the
// owner's events in between, and the live stream follows.
func TestCluster11_1_3_ReplayOfACursorTakenOnAnotherNode(t *testing.T) {
	tri := startTrio(t)
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		sid := tri.session()
		chat := streamtest.PresetTypes(event.PresetChat)
		ref, _, _ := subscribe(t, tr, tri.owner(), sid, "preset:chat", nil, false)
		a, _, _ := subscribe(t, tr, tri.nodes[1], sid, "preset:chat", nil, false)

		t1 := tri.owner().Submit(sid, "/long 80")
		var before []*protocol.EventEnvelope
		for streamtest.CountType(before, event.TextDelta) < 40 {
			before = append(before, a.Events(specRead, func(*protocol.EventEnvelope) bool { return true })...)
		}
		a.Close()
		cursor := before[len(before)-1].ID

		// Node 2, cold, while the answer may still stream.
		b, ack, _ := subscribe(t, tr, tri.nodes[2], sid, "preset:chat", &cursor, false)
		if ack.Since == nil || *ack.Since != cursor || ack.StreamingGap {
			t.Fatalf("node 2's ack for node 1's cursor %s: %+v", cursor, ack)
		}
		after, _ := readUntil(t, b, event.TurnCompleted, t1)
		streamtest.CheckIncreasing(t, "node 2 after node 1's cursor", after, cursor)
		all, _ := readUntil(t, ref, event.TurnCompleted, t1)
		if got, want := streamtest.IDs(append(before, after...)), streamtest.IDs(all); !slices.Equal(got, want) {
			t.Fatalf("the client saw %d events on nodes 1 and 2, the owner's client %d", len(got), len(want))
		}
		if ack.ReplayEventCount > 0 { // none when node 1's client had read up to the log's end
			tri.sameAsOwner("node 2's replay", sid, cursor, after[:ack.ReplayEventCount], chat)
		}
		b.Close()

		// Back to node 1 (cold again) after a turn it did not see.
		cursor = after[len(after)-1].ID
		tri.owner().WaitTurn(sid)
		t2 := tri.nodes[2].Submit(sid, "/echo while you were away")
		tri.owner().WaitTurn(sid)
		c, ack, _ := subscribe(t, tr, tri.nodes[1], sid, "preset:chat", &cursor, false)
		if ack.StreamingGap {
			t.Fatalf("node 1's ack after turn %s: %+v", t2, ack)
		}
		t3 := tri.nodes[1].Submit(sid, "/echo back again")
		again, _ := readUntil(t, c, event.TurnCompleted, t3)
		live, _ := readUntil(t, ref, event.TurnCompleted, t3)
		streamtest.CheckIncreasing(t, "node 1 after node 2's cursor", again, cursor)
		if !slices.Equal(streamtest.IDs(again), streamtest.IDs(live)) {
			t.Fatalf("after the second reconnect: %d events, the owner's client %d", len(again), len(live))
		}
		replay := again[:ack.ReplayEventCount]
		tri.sameAsOwner("node 1's replay", sid, cursor, replay, chat)
		if streamtest.CountType(replay, event.TurnCompleted) != 1 {
			t.Fatalf("node 1's replay of %d events does not hold turn %s", len(replay), t2)
		}
	})
}
