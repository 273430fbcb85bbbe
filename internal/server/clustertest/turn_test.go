package clustertest_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

const wait = 20 * time.Second

// attach subscribes a WebSocket client of node h to a session, with
// every event (preset:full).
func attach(t *testing.T, h *servertest.Harness, sid string) *streamtest.Client {
	t.Helper()
	c := streamtest.Attach(t, h.URL, sid)
	c.Subscribe("preset:full", nil, false)
	if f := c.Read(wait); f.Ack == nil {
		t.Fatalf("want subscribe_ack, got %s", f.Raw)
	}
	return c
}

// visible waits until node h's projection shows the session.
func visible(t *testing.T, h *servertest.Harness, sid string) {
	t.Helper()
	servertest.WaitFor(t, "the session on "+h.Config.Node, func() bool {
		return h.Do(http.MethodGet, "/sessions/"+sid, nil, nil) == http.StatusOK
	})
}

func ids(evs []*protocol.EventEnvelope, family event.Family) []string {
	var out []string
	for _, e := range evs {
		if event.FamilyOf(event.Type(e.Type)) == family {
			out = append(out, e.Type+" "+e.ID)
		}
	}
	return out
}

// TestTurnSubmittedToAnotherNodeRunsOnTheOwner: a session created on
// node A is owned by A; a turn submitted to node B is routed to A and
// runs there; B's client, following the tree through its feed, gets
// the whole turn (catalog and streaming events) in the same order and
// with the same ids as A's own client, ending with turn.completed.
func TestTurnSubmittedToAnotherNodeRunsOnTheOwner(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, onB := attach(t, a, sid), attach(t, b, sid)

	turn := b.Submit(sid, "hello from node b")
	gotB := onB.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	gotA := onA.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))

	turnOnly := func(evs []*protocol.EventEnvelope) []*protocol.EventEnvelope {
		var out []*protocol.EventEnvelope
		for _, e := range evs {
			if e.TurnID != nil && *e.TurnID == turn {
				out = append(out, e)
			}
		}
		return out
	}
	tb, ta := turnOnly(gotB), turnOnly(gotA)
	if len(tb) == 0 || tb[0].Type != string(event.TurnStarted) {
		t.Fatalf("node b's client: the turn does not start with turn.started: %v", ids(tb, event.Catalog))
	}
	if cb, ca := ids(tb, event.Catalog), ids(ta, event.Catalog); !slices.Equal(cb, ca) {
		t.Fatalf("catalog events differ:\nnode b %v\nnode a %v", cb, ca)
	}
	if sb, sa := ids(tb, event.Streaming), ids(ta, event.Streaming); len(sa) == 0 || !slices.Equal(sb, sa) {
		t.Fatalf("streaming events differ (or none):\nnode b %v\nnode a %v", sb, sa)
	}
	for i := 1; i < len(gotB); i++ {
		if gotB[i].ID <= gotB[i-1].ID {
			t.Fatalf("node b's client got %s after %s", gotB[i].ID, gotB[i-1].ID)
		}
	}
	// The turn ran on node a, the tree's owner.
	if holder := leaseHolder(t, url, sid); holder != "node-a" {
		t.Fatalf("the tree's lease is held by %q, want node-a", holder)
	}
	if st, err := b.Server.Store.Turn(t.Context(), turn); err != nil || st.Status != store.TurnCompleted {
		t.Fatalf("node b's projection of the turn: %+v, %v", st, err)
	}
}
