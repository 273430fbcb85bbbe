package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
)

// node is one metis node's cluster handles, on its own connection.
type node struct {
	name   string
	log    *cluster.Log
	leases *cluster.Leases
	router *cluster.Router
}

func newNode(t *testing.T, s *server.Server, name string, lcfg cluster.LeaseConfig) *node {
	t.Helper()
	nc := connect(t, s)
	l := openLog(t, nc, cluster.LogConfig{})
	ls, err := cluster.OpenLeases(ctx(t), l.JetStream(), name, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	return &node{name: name, log: l, leases: ls, router: cluster.NewRouter(nc, 5*time.Second, nil)}
}

func (n *node) own(t *testing.T, tree string) *cluster.Owner {
	t.Helper()
	o, err := cluster.Own(ctx(t), n.log, n.leases, tree)
	if err != nil {
		t.Fatalf("%s owns %s: %v", n.name, tree, err)
	}
	t.Cleanup(func() {
		if err := o.Release(context.Background()); err != nil {
			t.Errorf("release: %v", err)
		}
	})
	return o
}

// ownEventually takes the tree once its current lease expires.
func (n *node) ownEventually(t *testing.T, tree string) *cluster.Owner {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		o, err := cluster.Own(ctx(t), n.log, n.leases, tree)
		if err == nil {
			t.Cleanup(func() { _ = o.Release(context.Background()) })
			return o
		}
		if !errors.Is(err, cluster.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("%s owns %s: %v", n.name, tree, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestPausedOwnerThatLostItsLeaseCannotCommit(t *testing.T) {
	s := startServer(t)
	// node-a is paused: it does not renew, and does not notice the
	// lease expiring.
	a := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Second, Renew: time.Hour})
	b := newNode(t, s, "node-b", cluster.LeaseConfig{TTL: time.Second, Renew: liveRenew})
	tree := newSessionID()
	g := newEvents(t)

	oa := a.own(t, tree)
	started := g.make(tree, event.TurnStarted, "turn_1", map[string]any{})
	if _, err := oa.PublishCatalog(ctx(t), started, nil); err != nil {
		t.Fatal(err)
	}
	ob := b.ownEventually(t, tree)

	// node-a wakes up and goes on with its turn.
	stale := g.make(tree, event.TurnCompleted, "turn_1", map[string]any{})
	_, err := oa.PublishCatalog(ctx(t), stale, nil)
	if !errors.Is(err, cluster.ErrFenced) {
		t.Fatalf("paused owner's publish: %v, want ErrFenced", err)
	}
	// Its work stops: the context it runs the tree under is done.
	select {
	case <-oa.Context().Done():
	default:
		t.Fatal("fenced owner's context is not done")
	}
	if !errors.Is(context.Cause(oa.Context()), cluster.ErrFenced) {
		t.Fatalf("cause = %v, want ErrFenced", context.Cause(oa.Context()))
	}
	// Nothing more gets out of it, streaming events included.
	if err := oa.PublishStreamingAsync(g.make(tree, event.TextDelta, "turn_1", map[string]any{})); err == nil {
		t.Fatal("a fenced owner published a streaming event")
	}
	// The new owner ends the turn.
	cancelled := g.make(tree, event.TurnCancelled, "turn_1", map[string]any{"reason": "owner_lost"})
	if _, err := ob.PublishCatalog(ctx(t), cancelled, nil); err != nil {
		t.Fatalf("new owner's publish: %v", err)
	}
	ids := replayIDs(t, b.log, cluster.TreeFilter(tree))
	if len(ids) != 2 || ids[0] != started.ID || ids[1] != cancelled.ID {
		t.Fatalf("tree holds %v, want [%s %s]", ids, started.ID, cancelled.ID)
	}
}

func TestOwnerThatNoticesLostLeaseStopsBeforePublishing(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Second, Renew: time.Hour})
	b := newNode(t, s, "node-b", cluster.LeaseConfig{TTL: time.Second, Renew: liveRenew})
	tree := newSessionID()
	oa := a.own(t, tree)
	b.ownEventually(t, tree)
	if err := oa.Lease().Renew(ctx(t)); !errors.Is(err, cluster.ErrLeaseLost) {
		t.Fatalf("renew: %v, want ErrLeaseLost", err)
	}
	if !errors.Is(context.Cause(oa.Context()), cluster.ErrLeaseLost) {
		t.Fatalf("owner's cause = %v, want ErrLeaseLost", context.Cause(oa.Context()))
	}
	before, err := a.log.LastSeq(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oa.PublishCatalog(ctx(t), newEvents(t).make(tree, event.TurnStarted, "", map[string]any{}), nil); !errors.Is(err, cluster.ErrLeaseLost) {
		t.Fatalf("publish after losing the lease: %v, want ErrLeaseLost", err)
	}
	if after, _ := a.log.LastSeq(ctx(t)); after != before {
		t.Fatalf("the stream moved from %d to %d: the lost owner wrote", before, after)
	}
}

func TestOwnIsRefusedWhileAnotherNodeOwns(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Minute})
	b := newNode(t, s, "node-b", cluster.LeaseConfig{TTL: time.Minute})
	tree := newSessionID()
	a.own(t, tree)
	if _, err := cluster.Own(ctx(t), b.log, b.leases, tree); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("second owner: %v, want ErrLeaseHeld", err)
	}
}

// serve makes n own tree and answer its routed requests with h until
// the test ends (or it stops serving); it returns n's ownership and its
// serving of the tree.
func (n *node) serve(t *testing.T, tree string, h cluster.Handler) (*cluster.Owner, *cluster.Serving) {
	t.Helper()
	o := n.own(t, tree)
	serving, err := n.router.Serve(o.Context(), tree, cluster.HandlersOf(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(serving.Stop)
	return o, serving
}
