package clustertest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// leaderDown is how long the stream's leader stays dead: long enough
// for the others to elect a new one while the turn streams.
const leaderDown = 3 * time.Second

// leaderTestTTL is the lease TTL of the leader test's nodes.
const leaderTestTTL = time.Minute

// TestKilledStreamLeaderLeavesEveryClientWhole: three metis nodes on a
// three-server NATS cluster (each server a process of its own, the
// stream with three replicas); node a owns a session and streams a long
// answer when the NATS server that leads the stream is killed
// (SIGKILL), then restarted on its store. The owner's client gets every
// event the owner emitted; each client of b and c gets every one of
// them too, exactly once and in order, except streaming events that
// never reached the log, which it must be told of (a streaming_gap on
// the subscribe its node's resync close makes it send): no delta may
// go missing silently.
func TestKilledStreamLeaderLeavesEveryClientWhole(t *testing.T) {
	for i := range faultRuns(t) {
		t.Run(fmt.Sprintf("run %d", i+1), killedLeaderRun)
	}
}

func killedLeaderRun(t *testing.T) {
	ns := startNATSProcs(t, 3)
	nodes := make([]*servertest.Harness, 3)
	for i, name := range []string{"node-a", "node-b", "node-c"} {
		nodes[i] = servertest.Start(t, "", func(c *config.Config) {
			c.NATS, c.Node, c.DemoDelay = ns.URLs(), name, 2*time.Millisecond
			// The fault is the stream's leader, not the owner: a lease
			// bucket that lost its leader too cannot be renewed until a
			// new one is elected, which on a loaded machine can outlast
			// the default 10 s and move the tree (the pause test's case).
			c.LeaseTTL = leaderTestTTL
		})
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	sid := a.CreateSession()
	visible(t, b, sid)
	visible(t, c, sid)
	fa, fb, fc := follow(t, "a's client", sid, on(a.URL)), follow(t, "b's client", sid, on(b.URL)), follow(t, "c's client", sid, on(c.URL))
	// a's client is the reference: what b's and c's get of the turn must
	// be what it got, so each subscribes before the turn starts.
	for _, f := range []*follower{fa, fb, fc} {
		f.waitSubscribed(t, wait)
	}

	turn := a.Submit(sid, "/long 800")
	for _, f := range []*follower{fa, fb, fc} {
		f.waitFor(t, "deltas of the turn", wait, deltasOf(turn, 50))
	}
	leader := ns.streamLeader(t, cluster.DefaultStream)
	leader.kill()
	time.Sleep(leaderDown)
	leader.start()

	for _, f := range []*follower{fa, fb, fc} {
		f.waitFor(t, "the turn's end", 2*time.Minute, sawType(event.TurnCompleted, turn))
	}
	// The reference is what the owner's client got: every event the
	// owner emitted, whether or not it reached the log.
	emitted := envelopeEvents(fa.events())
	end := ""
	for _, e := range emitted {
		if e.Type == event.TurnCompleted && e.TurnID == turn {
			end = e.ID
		}
	}
	logged := logEvents(t, ns.URLs(), sid)
	inLog := map[string]bool{}
	for _, e := range logged {
		inLog[e.ID] = true
	}
	missing := 0
	for _, e := range emitted {
		if e.ID <= end && !inLog[e.ID] {
			missing++
			if event.FamilyOf(e.Type) == event.Catalog {
				t.Errorf("the owner's client got %s %s, which the log does not hold", e.Type, e.ID)
			}
		}
	}
	t.Logf("streaming events the owner emitted that never reached the log: %d", missing)
	if missing > 0 {
		// The owner counted them; each other node found the gap.
		if got := metric(t, a, `metis_cluster_streaming_publishes_dropped_total{reason="refused"}`); got < 1 {
			t.Errorf("node a counted %v refused streaming publishes, want some", got)
		}
		for _, h := range []*servertest.Harness{b, c} {
			if got := metric(t, h, "metis_cluster_stream_gaps_total"); got < 1 {
				t.Errorf("node %s counted %v gaps, want some", h.Config.Node, got)
			}
		}
	}
	for _, f := range []*follower{fb, fc} {
		d := checkDelivery(f, emitted, end)
		t.Logf("%s: lost %d, duplicated %d, misordered %d, late %d (excused by a streaming gap: %d); %s",
			f.name, d.Lost, d.Duplicated, d.Misordered, d.Late, d.Excused, f.summary())
		if !d.ok() {
			t.Errorf("%s: lost %d, duplicated %d, misordered %d, late %d: %q", f.name, d.Lost, d.Duplicated, d.Misordered, d.Late, d.Examples)
		}
	}
}

// envelopeEvents turns what a client got into events to check others
// against (id, type, session, turn).
func envelopeEvents(evs []*protocol.EventEnvelope) []*event.Event {
	out := make([]*event.Event, 0, len(evs))
	for _, e := range evs {
		ev := &event.Event{ID: e.ID, Type: event.Type(e.Type), SessionID: e.SessionID}
		if e.TurnID != nil {
			ev.TurnID = *e.TurnID
		}
		out = append(out, ev)
	}
	return out
}
