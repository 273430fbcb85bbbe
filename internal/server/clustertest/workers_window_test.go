package clustertest_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestWorkersIncludedOnANodeThatStartsFollowingATakenTree: a tree
// whose newest event is a worker's (a feedback on the worker's turn,
// after the planner's turn ended) is taken over by another node, which
// emits nothing (no turn was open): the tree's last catalog message in
// the log is the new owner's marker. A client that includes workers
// then subscribes on a third node, cold, with a cursor at the
// planner's last turn event: its seam covers the worker's newer event (the
// node's delivery point goes to the newest event the store holds for
// any session of the tree, not only the planner's), so the replay
// holds it; the client would otherwise never get it, as the node's
// feed starts after it.
func TestWorkersIncludedOnANodeThatStartsFollowingATakenTree(t *testing.T) {
	url := startNATS(t)
	a, b, c := node(t, url, "node-a"), node(t, url, "node-b"), node(t, url, "node-c")
	sid := a.CreateSession()
	turn := a.Submit(sid, streamtest.DelegateCmd("list the files"))
	a.WaitTurn(sid)

	planner := a.Live.Events(sid)
	cursor := streamtest.LastID(planner)
	var worker string
	for _, e := range planner {
		if e.Type == event.DelegateStarted {
			worker = streamtest.EventPayloadOf[protocol.DelegateStartedPayload](t, e).WorkerSessionID
		}
	}
	if worker == "" {
		t.Fatalf("turn %s started no worker", turn)
	}
	wturn := streamtest.FirstOf(t, "node a", a.Live.Events(worker), event.TurnStarted, "").TurnID
	var fb struct {
		EventID string `json:"event_id"`
	}
	if st := a.Do(http.MethodPost, "/sessions/"+worker+"/turns/"+wturn+"/feedback", map[string]string{"rating": "up"}, &fb); st != http.StatusCreated {
		t.Fatalf("feedback on the worker's turn: %d", st)
	}
	if fb.EventID <= cursor {
		t.Fatalf("the worker's feedback %s is not after the planner's last event %s", fb.EventID, cursor)
	}

	// Node b follows the tree; node a goes, and b takes the tree over.
	visible(t, b, worker)
	bc, _, _ := streamtest.Subscribe(t, streamtest.WebSocket, b.URL, sid, specRead, "preset:full", nil, false)
	defer bc.Close()
	// b's client's registration is emitted by the owner, a: wait for it,
	// so that b takes the tree over with nothing left to emit and the
	// tree's last catalog message stays b's ownership marker.
	var registered string
	servertest.WaitFor(t, "node a to emit the registration of node b's client", func() bool {
		for _, e := range a.Live.Events(sid) {
			if e.Type == event.BusSubscriberRegistered {
				registered = e.ID
				return true
			}
		}
		return false
	})
	a.Stop()
	servertest.WaitFor(t, "node b to take the tree", func() bool { return leaseHolder(t, url, sid) == "node-b" })

	visible(t, c, worker)
	cl, ack, _ := streamtest.Subscribe(t, streamtest.WebSocket, c.URL, sid, specRead,
		protocol.Filter{IncludeWorkerSessions: true}, &cursor, false)
	defer cl.Close()
	if ack.SeamEventID < fb.EventID {
		t.Fatalf("node c's seam %s is before the worker's feedback %s", ack.SeamEventID, fb.EventID)
	}
	var replay []*protocol.EventEnvelope
	for len(replay) < ack.ReplayEventCount {
		f := streamtest.NextFrame(t, cl, specRead)
		if f.Event == nil {
			t.Fatalf("want a replayed event, got %s", f.Raw)
		}
		replay = append(replay, f.Event)
	}
	if len(replay) != 2 || replay[0].ID != fb.EventID || replay[0].Type != string(event.FeedbackSubmitted) || replay[1].ID != registered {
		raw, _ := json.Marshal(replay)
		t.Fatalf("node c's replay after %s: %s, want the worker's feedback %s, then the registration %s of node b's client",
			cursor, raw, fb.EventID, registered)
	}
}
