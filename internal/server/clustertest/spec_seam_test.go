package clustertest_test

// Spec §11.1 items 2 and 16 over three nodes: snapshots and replays
// taken on nodes that do not own the tree, while a turn streams.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestCluster11_1_16_SnapshotReplaySeamOnNonOwners: while turns stream
// on the owner, clients subscribe on the two other nodes, with a
// snapshot or with a cursor: node 1 keeps a client of the session all
// along (its feed runs), node 2 has none between rounds (each round's
// first client there starts its feed). For every client, each event
// after its seam arrives exactly once and in order, and they are
// exactly the events the owner delivered after it; a snapshot holds
// exactly the messages committed as of its snapshot_at_event_id (spec
// §11.1.2) and names the turn in flight; a replay is exactly the
// owner's events in (since, seam], without a streaming gap.
func TestCluster11_1_16_SnapshotReplaySeamOnNonOwners(t *testing.T) {
	tri := startTrio(t, withQueue(100_000))
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		sid := tri.session()
		owner := tri.owner()
		observer, oack, _ := subscribe(t, tr, tri.nodes[1], sid, "preset:full", nil, false)
		observed := oack.SeamEventID // the observer's last event
		chat := streamtest.PresetTypes(event.PresetChat)
		type snapRecord struct {
			snap *protocol.Snapshot
			what string
			evs  []*protocol.EventEnvelope // what its client read after it
		}
		var snaps []snapRecord
		midTurn := 0
		const rounds = 4
		for round := range rounds {
			deltas := countDelivered(owner, sid, event.TextDelta)
			prev := lastID(owner, sid)
			turn := owner.Submit(sid, "/long 60")
			eventually(t, "the answer to stream", func() bool { return countDelivered(owner, sid, event.TextDelta) >= deltas+10 })
			started := firstOf(t, owner, sid, event.TurnStarted, turn)
			kinds := []struct {
				node     int
				filter   string
				snapshot bool
				since    string
			}{
				{2, "preset:full", true, ""},
				{1, "preset:chat", true, ""},
				{2, "preset:chat", false, started},
				{1, "preset:full", false, prev},
				{2, "preset:full", false, prev},
			}
			type sub struct {
				c     streamtest.Conn
				ack   *protocol.SubscribeAck
				lower string
				set   map[string]bool
				what  string
				named string // the turn a snapshot names in flight
				snap  int    // its snapshot's index in snaps, or -1
			}
			var subs []sub
			for i, k := range kinds {
				var since *string
				if k.since != "" {
					since = ptr(k.since)
				}
				h := tri.nodes[k.node]
				c, ack, snap := subscribe(t, tr, h, sid, k.filter, since, k.snapshot)
				s := sub{c: c, ack: ack, lower: k.since, snap: -1, what: fmt.Sprintf("round %d client %d (%s, %s, snapshot %v, since %q)", round, i, h.Config.Node, k.filter, k.snapshot, k.since)}
				if k.filter == "preset:chat" {
					s.set = chat
				}
				if k.snapshot {
					s.lower = snap.SnapshotAtEventID
					if ack.SeamEventID != s.lower {
						t.Fatalf("%s: seam_event_id %s, snapshot_at_event_id %s", s.what, ack.SeamEventID, s.lower)
					}
					s.snap = len(snaps)
					snaps = append(snaps, snapRecord{snap: snap, what: s.what})
					s.named = snapshotTurn(t, snap)
				} else if ack.StreamingGap {
					t.Fatalf("%s: streaming_gap with a recent cursor: %+v", s.what, ack)
				}
				subs = append(subs, s)
			}
			owner.WaitTurn(sid)
			end := firstOf(t, owner, sid, event.TurnCompleted, turn)
			for _, s := range subs {
				inFlight := s.lower >= started && s.lower < end
				if inFlight {
					midTurn++
				}
				if s.ack.Snapshot && (s.named == turn) != inFlight {
					t.Fatalf("%s: snapshot as of %s (turn %s from %s to %s) names turn %q in flight", s.what, s.lower, turn, started, end, s.named)
				}
				if s.lower >= end {
					// The turn ended before this client's seam: it gets
					// nothing of it (the next round checks its stream).
					s.c.Close()
					continue
				}
				evs, _ := readUntil(t, s.c, event.TurnCompleted, turn)
				if s.snap >= 0 {
					snaps[s.snap].evs = evs
				}
				streamtest.CheckIncreasing(t, s.what, evs, s.lower)
				tri.sameAsOwner(s.what, sid, s.lower, evs, s.set)
				if s.ack.Since != nil {
					replay := evs[:s.ack.ReplayEventCount]
					if n := len(tri.ownerDelivered(sid, s.lower, s.ack.SeamEventID, s.set)); n != len(replay) {
						t.Fatalf("%s: replay_event_count %d, the owner delivered %d in (since, seam]", s.what, len(replay), n)
					}
				}
				s.c.Close()
			}
			// Everything since its last event: the turn, and the
			// meta-events of the round's clients (registered and
			// unregistered, by the owner for the other nodes' clients).
			evs, _ := readUntil(t, observer, event.TurnCompleted, turn)
			tri.sameAsOwner("node 1's observer", sid, observed, evs, nil)
			observed = evs[len(evs)-1].ID
		}
		if midTurn == 0 {
			t.Fatal("no client subscribed while a turn was streaming; the test did not exercise the seam")
		}
		t.Logf("%d clients subscribed mid-turn", midTurn)

		final := messagesOf(t, owner, sid)
		anchor := anchors(t, owner, sid, final)
		inFlight := 0
		for _, r := range snaps {
			stored, m := streamtest.InFlight(t, r.snap, anchor)
			want := streamtest.AsOf(final, anchor, r.snap.SnapshotAtEventID, owner.Config.SnapshotMessages)
			if len(stored) != len(want) {
				t.Fatalf("%s: snapshot as of %s holds %d stored messages, want %d", r.what, r.snap.SnapshotAtEventID, len(stored), len(want))
			}
			for i := range want {
				if !streamtest.JSONEqual(stored[i], want[i]) {
					t.Fatalf("%s: snapshot message %d:\n%s\nwant\n%s", r.what, i, stored[i], want[i])
				}
			}
			if m == nil {
				continue
			}
			// The answer in flight at the seam (contract §11): its content
			// so far, continued by the deltas after the seam, is the
			// stored answer.
			inFlight++
			got := m.Content
			if m.Status == protocol.StatusStreaming {
				var done bool
				if got, _, done = streamtest.Continue(t, m, m.ID, r.evs); !done {
					t.Fatalf("%s: no message.complete of %s after the seam", r.what, m.ID)
				}
			}
			i := slices.IndexFunc(final, func(f message.Message) bool { return f.ID == m.ID })
			if i < 0 || m.StartMissing {
				t.Fatalf("%s: message in flight %+v is not stored, or flagged start_missing", r.what, m)
			}
			if d := streamtest.SameContent(got, final[i].Content); d != "" {
				t.Fatalf("%s: message %s in flight, continued: %s", r.what, m.ID, d)
			}
		}
		t.Logf("%d of %d snapshots held the answer in flight", inFlight, len(snaps))
	})
}

// withQueue sets the client queue bound of every node: large for the
// tests that are not about slow clients.
func withQueue(n int) servertest.Option {
	return func(c *config.Config) { c.ClientQueue = n }
}

// snapshotTurn returns the turn a snapshot names in flight ("" for
// none).
func snapshotTurn(t *testing.T, s *protocol.Snapshot) string {
	t.Helper()
	var sum struct {
		CurrentTurnID *string `json:"current_turn_id"`
	}
	if err := json.Unmarshal(s.Session, &sum); err != nil {
		t.Fatalf("snapshot session %s: %v", s.Session, err)
	}
	if sum.CurrentTurnID == nil {
		return ""
	}
	return *sum.CurrentTurnID
}

// countDelivered counts the events of a type node h delivered for a
// session.
func countDelivered(h *servertest.Harness, sid string, typ event.Type) int {
	return streamtest.CountEvents(h.Live.Events(sid), typ)
}

// lastID is the id of the newest event node h delivered for a session.
func lastID(h *servertest.Harness, sid string) string {
	return streamtest.LastID(h.Live.Events(sid))
}

// firstOf returns the id of the first event of a type and turn node h
// delivered for a session.
func firstOf(t *testing.T, h *servertest.Harness, sid string, typ event.Type, turn string) string {
	t.Helper()
	return streamtest.FirstOf(t, h.Config.Node, h.Live.Events(sid), typ, turn).ID
}

// messagesOf returns a session's conversation from node h's API.
func messagesOf(t *testing.T, h *servertest.Harness, sid string) []message.Message {
	t.Helper()
	var page struct {
		Messages []message.Message `json:"messages"`
		HasMore  bool              `json:"has_more"`
	}
	if err := json.Unmarshal(rawGET(t, h, "/sessions/"+sid+"/messages?limit=500"), &page); err != nil || page.HasMore {
		t.Fatalf("messages: %v (more: %v)", err, page.HasMore)
	}
	return page.Messages
}

// anchors maps each message id to the id of the catalog event it was
// committed with (streamtest.Anchors), read from node h's store.
func anchors(t *testing.T, h *servertest.Harness, sid string, msgs []message.Message) map[string]string {
	t.Helper()
	evs, err := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}})
	servertest.Must(t, err)
	return streamtest.Anchors(t, evs, msgs)
}
