package clustertest_test

import (
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/streamtest"
)

// TestIdleTreeReleasesItsLease: a tree whose owner published nothing
// for six lease TTLs, with no turn open and no client on the owner,
// gives its lease up (counted as released), so its owner stops renewing
// it; a tree with a client on its owner keeps its lease. The released
// tree is taken again by the next node that needs it (here node b, for
// its client's registration, then the turn submitted to it), and the
// turn runs there.
func TestIdleTreeReleasesItsLease(t *testing.T) {
	url := startNATS(t)
	a, b := failoverNode(t, url, "node-a"), failoverNode(t, url, "node-b")
	quiet, watched := a.CreateSession(), a.CreateSession()
	visible(t, b, quiet)
	onA := attach(t, a, watched) // a client of the owner keeps the tree's lease
	a.Submit(quiet, "/echo hello")
	a.WaitTurn(quiet)

	for deadline := time.Now().Add(idleWait); leaseHolder(t, url, quiet) != ""; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the idle tree's lease is still held after %s", idleWait)
		}
	}
	if got := metric(t, a, `metis_cluster_lease_losses_total{reason="released"}`); got < 1 {
		t.Fatalf("released leases on node a: %v", got)
	}
	if h := leaseHolder(t, url, watched); h != "node-a" {
		t.Fatalf("the lease of a tree with a client on its owner is held by %q", h)
	}

	follower := attach(t, b, quiet)
	next := b.Submit(quiet, "/echo again")
	got := follower.Events(wait, streamtest.UntilType(event.TurnCompleted, next))
	if h := leaseHolder(t, url, quiet); h != "node-b" {
		t.Fatalf("after a turn submitted to node b the lease is held by %q", h)
	}
	streamtest.CheckIncreasing(t, "node b's client", got, "")
	onA.Close()
}

// idleWait bounds how long TestIdleTreeReleasesItsLease waits: six
// TTLs, then up to three more for the check.
var idleWait = 9*failoverTTL + 10*time.Second
