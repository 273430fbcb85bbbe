package clustertest_test

// A node restart rebuilds its projection from the log (issue 14): the
// node serves what it served before, byte for byte.

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/streamtest"
)

// policyVersion matches the snapshot's routing_policy_version: the
// version of the serving node's own routing policy (when it loaded its
// routing.yaml, or its default policy: at start), not of the
// projection, so a restarted node names a new one.
var policyVersion = regexp.MustCompile(`"routing_policy_version":"[^"]*"`)

// snapshotMoves matches what the clients of an earlier serve move in a
// later snapshot: each client, of whichever node, leaves its
// bus.subscriber_registered and _unregistered in the tree, so the
// seam and the last activity come later (checked apart: only
// meta-events came between).
var snapshotMoves = regexp.MustCompile(`"(snapshot_at_event_id|last_activity_at)":"[^"]*"`)

// TestClusterNodeRestartRebuildsItsProjection: a session owned by node
// 0 runs a turn with a tool call, a delegation to a worker and a short
// answer. Node 2, which never owned it, serves its messages (GET
// …/messages), a snapshot and a replay from the first turn's start
// with the workers included, over each transport. Node 2 is then
// stopped and started again on the same home (its projection resumes
// from its cursor), and once more on an empty home (its projection is
// rebuilt from the log): each time it serves the same messages, the
// same snapshot frame (but for the version of its own routing policy,
// which it loaded again, and a seam and last activity moved only by
// the meta-events of the clients served before) and the same replay
// frames, byte for byte.
func TestClusterNodeRestartRebuildsItsProjection(t *testing.T) {
	tri := startTrio(t, withQueue(100_000))
	sid := tri.session()
	first := tri.nodes[1].Submit(sid, "what is in my workspace?")
	tri.owner().WaitTurn(sid)
	tri.nodes[2].Submit(sid, streamtest.DelegateCmd("/echo from the worker"))
	tri.owner().WaitTurn(sid)
	last := tri.owner().Submit(sid, "/echo and done")
	tri.owner().WaitTurn(sid)
	since := firstOf(t, tri.owner(), sid, event.TurnStarted, first)
	end := firstOf(t, tri.owner(), sid, event.TurnCompleted, last)

	type served struct {
		messages []byte
		snapshot map[string][]byte   // by transport
		seam     map[string]string   // the snapshot's, by transport
		replay   map[string][][]byte // by transport
	}
	serve := func(what string) served {
		t.Helper()
		h := tri.nodes[2]
		eventually(t, what+": node 2's projection", func() bool { return lastStored(t, h, sid) >= end })
		s := served{messages: rawGET(t, h, "/sessions/"+sid+"/messages?limit=500"), snapshot: map[string][]byte{}, seam: map[string]string{}, replay: map[string][][]byte{}}
		for _, tr := range streamtest.Transports {
			c := tr.Connect(t, h.URL, sid, nil)
			c.Subscribe("preset:full", nil, true)
			if f := nextFrame(t, c); f.Ack == nil {
				t.Fatalf("%s: want subscribe_ack, got %s", what, f.Raw)
			}
			f := nextFrame(t, c)
			if f.Snap == nil {
				t.Fatalf("%s: want a snapshot, got %s", what, f.Raw)
			}
			s.snapshot[tr.Name] = policyVersion.ReplaceAll(f.Raw, []byte(`"routing_policy_version":"(this node's)"`))
			s.snapshot[tr.Name] = snapshotMoves.ReplaceAll(s.snapshot[tr.Name], []byte(`"$1":"(moved by meta-events)"`))
			s.seam[tr.Name] = f.Snap.SnapshotAtEventID
			c.Close()

			c, ack, _ := subscribe(t, tr, h, sid, streamtest.PresetFilter(event.PresetChat)(true), &since, false)
			if ack.StreamingGap || ack.ReplayEventCount == 0 {
				t.Fatalf("%s: replay ack %+v", what, ack)
			}
			for range ack.ReplayEventCount {
				f := nextFrame(t, c)
				if f.Event == nil {
					t.Fatalf("%s: want a replayed event, got %s", what, f.Raw)
				}
				s.replay[tr.Name] = append(s.replay[tr.Name], f.Raw)
			}
			c.Close()
		}
		return s
	}
	same := func(what string, got, want served) {
		t.Helper()
		if !bytes.Equal(got.messages, want.messages) {
			t.Fatalf("%s: messages differ:\n%s\nwant\n%s", what, got.messages, want.messages)
		}
		for _, tr := range streamtest.Transports {
			if got.seam[tr.Name] < want.seam[tr.Name] {
				t.Fatalf("%s, %s: snapshot as of %s, before as of %s", what, tr.Name, got.seam[tr.Name], want.seam[tr.Name])
			}
			for _, ev := range tri.ownerDelivered(sid, want.seam[tr.Name], got.seam[tr.Name], nil) {
				if !strings.HasPrefix(string(ev.Type), "bus.subscriber_") {
					t.Fatalf("%s, %s: %s %s came between the snapshots", what, tr.Name, ev.ID, ev.Type)
				}
			}
			if !bytes.Equal(got.snapshot[tr.Name], want.snapshot[tr.Name]) {
				t.Fatalf("%s, %s: snapshot differs:\n%s\nwant\n%s", what, tr.Name, got.snapshot[tr.Name], want.snapshot[tr.Name])
			}
			if !sameFrames(got.replay[tr.Name], want.replay[tr.Name]) {
				t.Fatalf("%s, %s: the replay's %d frames differ from the %d before", what, tr.Name, len(got.replay[tr.Name]), len(want.replay[tr.Name]))
			}
		}
	}

	before := serve("before the restart")
	if !bytes.Equal(before.messages, rawGET(t, tri.owner(), "/sessions/"+sid+"/messages?limit=500")) {
		t.Fatal("node 2's messages differ from the owner's")
	}
	tri.restart(2, "")
	same("restarted on its home", serve("restarted on its home"), before)
	tri.restart(2, t.TempDir())
	same("restarted on an empty home", serve("restarted on an empty home"), before)
}
