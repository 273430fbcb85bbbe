package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
)

// nextChange returns the next lease change of tree, skipping others.
func nextChange(t *testing.T, w *cluster.LeaseWatcher, tree string) cluster.LeaseChange {
	t.Helper()
	wctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		c, err := w.Next(wctx)
		if err != nil {
			t.Fatalf("watch %s: %v", tree, err)
		}
		if c.Tree == tree {
			return c
		}
	}
}

// TestLeaseWatchSeesTakesExpiriesAndReleases: a node watching the lease
// bucket sees a lease taken (with its holder), the lease of a paused
// owner expire (the bucket's marker), and a released lease go, each as
// a change of its tree; after an expiry the watcher's node can take the
// tree.
func TestLeaseWatchSeesTakesExpiriesAndReleases(t *testing.T) {
	s := startServer(t)
	paused := openLeases(t, s, "node-a", cluster.LeaseConfig{TTL: time.Second, Renew: time.Hour})
	b := openLeases(t, s, "node-b", cluster.LeaseConfig{TTL: time.Second, Renew: liveRenew})
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	w, err := b.Watch(wctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := w.Stop(); err != nil {
			t.Error(err)
		}
	}()

	expiring, released := newSessionID(), newSessionID()
	la, err := paused.Acquire(ctx(t), expiring)
	if err != nil {
		t.Fatal(err)
	}
	release(t, la)
	if c := nextChange(t, w, expiring); c.Holder != "node-a" || c.Revision == 0 {
		t.Fatalf("taken: %+v, want holder node-a", c)
	}
	if c := nextChange(t, w, expiring); c.Holder != "" {
		t.Fatalf("after the TTL: %+v, want the lease gone", c)
	}
	lb, err := b.Acquire(ctx(t), expiring)
	if err != nil {
		t.Fatalf("take the expired tree: %v", err)
	}
	release(t, lb)
	if c := nextChange(t, w, expiring); c.Holder != "node-b" {
		t.Fatalf("taken again: %+v, want holder node-b", c)
	}

	lr, err := b.Acquire(ctx(t), released)
	if err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, w, released); c.Holder != "node-b" {
		t.Fatalf("taken: %+v", c)
	}
	if err := lr.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, w, released); c.Holder != "" {
		t.Fatalf("after release: %+v, want the lease gone", c)
	}

	stop()
	if _, err := w.Next(wctx); err == nil {
		t.Fatal("Next after the watch's context ended did not fail")
	}
}

// TestTreeTailIsTheNewestEventOfEitherFamily: a tree's tail is the
// newest event id among its sessions' catalog and streaming subjects
// (a streaming delta newer than every catalog event included), and the
// sequence of the tree's last message, ownership markers included; a
// tree with nothing in the log has an empty tail.
func TestTreeTailIsTheNewestEventOfEitherFamily(t *testing.T) {
	s := startServer(t)
	n := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Minute})
	tree, worker := newSessionID(), newSessionID()
	if tail, err := n.log.TreeTail(ctx(t), tree); err != nil || tail != (cluster.Tail{}) {
		t.Fatalf("empty tree: %+v, %v", tail, err)
	}
	g := newEvents(t)
	var last *event.Event
	for i, sid := range []string{tree, worker, tree, worker} {
		c := g.make(sid, event.TurnStarted, "turn_1", map[string]any{})
		if _, err := n.log.PublishCatalog(ctx(t), tree, c, nil); err != nil {
			t.Fatal(err)
		}
		last = g.make(sid, event.TextDelta, "turn_1", map[string]any{"i": i})
		if _, err := n.log.PublishStreaming(ctx(t), tree, last); err != nil {
			t.Fatal(err)
		}
	}
	// Another tree's later events are not this tree's tail.
	other := newSessionID()
	if _, err := n.log.PublishCatalog(ctx(t), other, g.make(other, event.TurnStarted, "turn_2", map[string]any{}), nil); err != nil {
		t.Fatal(err)
	}
	tail, err := n.log.TreeTail(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	if tail.ID != last.ID {
		t.Fatalf("tail id %s, want the last delta %s", tail.ID, last.ID)
	}
	o := n.own(t, tree)
	tail, err = n.log.TreeTail(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	if tail.ID != last.ID || tail.Seq != o.LastCatalogSeq() {
		t.Fatalf("after a claim: %+v, want id %s and the marker's seq %d", tail, last.ID, o.LastCatalogSeq())
	}
}
