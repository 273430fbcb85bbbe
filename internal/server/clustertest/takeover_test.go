package clustertest_test

import (
	"testing"

	"github.com/metis-agent/metis/internal/store"
)

// TestTreeOfAStoppedNodeIsTakenByTheNextRequest: a node that shuts down
// releases the leases of its trees; a turn then submitted to another
// node finds no owner, and that node takes the tree and runs the turn
// itself, committing through the log.
func TestTreeOfAStoppedNodeIsTakenByTheNextRequest(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	a.Stop()
	if holder := leaseHolder(t, url, sid); holder != "" {
		t.Fatalf("after node a stopped, the tree's lease is held by %q", holder)
	}

	turn := b.Submit(sid, "hello again")
	b.WaitTurn(sid)
	if holder := leaseHolder(t, url, sid); holder != "node-b" {
		t.Fatalf("the tree's lease is held by %q, want node-b", holder)
	}
	if st, err := b.Server.Store.Turn(t.Context(), turn); err != nil || st.Status != store.TurnCompleted {
		t.Fatalf("node b's turn row: %+v, %v", st, err)
	}
}
