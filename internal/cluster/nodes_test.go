package cluster_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
)

func openNodes(t *testing.T, nc *nats.Conn, cfg cluster.NodesConfig) *cluster.Nodes {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	n, err := cluster.OpenNodes(ctx(t), js, cfg)
	if err != nil {
		t.Fatalf("open nodes: %v", err)
	}
	return n
}

func names(ns []cluster.NodeInfo) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

// TestNodesAnnounceThemselvesAndLeave: each node's announcement lists
// its name, address, start, version and how far its projection applied
// the log; a heartbeat refreshes the applied sequence, a new address
// is announced at once, and a node that stops leaves the directory.
func TestNodesAnnounceThemselvesAndLeave(t *testing.T) {
	s := startServer(t)
	dir := openNodes(t, connect(t, s), cluster.NodesConfig{Heartbeat: 50 * time.Millisecond})
	var applied atomic.Uint64
	applied.Store(7)
	started := time.Now().UTC().Truncate(time.Millisecond)
	a, err := openNodes(t, connect(t, s), cluster.NodesConfig{Heartbeat: 50 * time.Millisecond}).
		Announce(ctx(t), cluster.NodeInfo{Name: "node-a", Started: started, Version: "v1.2.3"}, applied.Load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	b, err := openNodes(t, connect(t, s), cluster.NodesConfig{}).
		Announce(ctx(t), cluster.NodeInfo{Name: "node-b", Started: started}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })

	list, err := dir.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list); !slices.Equal(got, []string{"node-a", "node-b"}) {
		t.Fatalf("nodes %v, want node-a and node-b", got)
	}
	if n := list[0]; !n.Started.Equal(started) || n.Version != "v1.2.3" || n.Applied != 7 || n.Heartbeat.IsZero() {
		t.Fatalf("node-a announced %+v", n)
	}

	// The heartbeat carries the projection's progress; the address
	// comes as soon as the node listens.
	applied.Store(42)
	a.SetAddress("http://127.0.0.1:8421")
	waitFor(t, func() bool {
		list, err := dir.List(ctx(t))
		return err == nil && len(list) == 2 && list[0].Address == "http://127.0.0.1:8421" && list[0].Applied == 42
	})

	if err := b.Stop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if list, err := dir.List(ctx(t)); err != nil || !slices.Equal(names(list), []string{"node-a"}) {
		t.Fatalf("after node-b stopped: %v, %v; want node-a only", names(list), err)
	}
}

// TestDeadNodeLeavesTheDirectory: a node that stops sending heartbeats
// without leaving (its connection is gone) disappears after the TTL.
func TestDeadNodeLeavesTheDirectory(t *testing.T) {
	s := startServer(t)
	dir := openNodes(t, connect(t, s), cluster.NodesConfig{TTL: time.Second})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	a, err := openNodes(t, nc, cluster.NodesConfig{TTL: time.Second, Heartbeat: 100 * time.Millisecond}).
		Announce(ctx(t), cluster.NodeInfo{Name: "node-a", Started: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := dir.List(ctx(t)); err != nil || len(list) != 1 {
		t.Fatalf("nodes %v, %v; want node-a", names(list), err)
	}
	nc.Close() // the node dies: no heartbeat, no goodbye
	// The bucket's TTL (1 s) removes the announcement; a loaded server
	// expired it more than 30 s late once, so List also leaves out an
	// announcement older than twice the TTL plus 5 s, which this waits
	// out with room.
	waitForWithin(t, 30*time.Second, func() bool {
		list, err := dir.List(ctx(t))
		return err == nil && len(list) == 0
	})
	_ = a.Stop(ctx(t)) // the connection is closed: nothing to delete
}

// TestLeasesListsHolders: the lease listing names each held tree's
// node, revision and acquisition; a released lease leaves it, and a
// limit truncates it.
func TestLeasesListsHolders(t *testing.T) {
	s := startServer(t)
	cfg := cluster.LeaseConfig{TTL: time.Minute}
	a, b := newNode(t, s, "node-a", cfg), newNode(t, s, "node-b", cfg)
	t1, t2 := newSessionID(), newSessionID()
	before := time.Now().Add(-time.Second)
	o1 := a.own(t, t1)
	b.own(t, t2)

	got, truncated, err := a.leases.List(ctx(t), 0)
	if err != nil || truncated {
		t.Fatalf("list: %v, truncated %v", err, truncated)
	}
	want := map[string]string{t1: "node-a", t2: "node-b"}
	if len(got) != 2 {
		t.Fatalf("leases %+v, want two", got)
	}
	for _, l := range got {
		if want[l.Tree] != l.Node || l.Revision == 0 || l.Acquired.Before(before) || l.Renewed.Before(before) {
			t.Fatalf("lease %+v, want tree %s held by %s since the test began", l, l.Tree, want[l.Tree])
		}
	}
	if l := got[0]; l.Tree != min(t1, t2) {
		t.Fatalf("leases not by tree: %+v", got)
	}
	if one, truncated, err := a.leases.List(ctx(t), 1); err != nil || !truncated || len(one) != 1 {
		t.Fatalf("list with limit 1: %+v, truncated %v, %v", one, truncated, err)
	}

	if err := o1.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	got, _, err = b.leases.List(ctx(t), 0)
	if err != nil || len(got) != 1 || got[0].Tree != t2 {
		t.Fatalf("after release: %+v, %v; want %s only", got, err, t2)
	}
}

// TestLastCatalogSeqAllIsTheCatalogTail: the newest catalog message of
// any tree, streaming messages after it left out.
func TestLastCatalogSeqAllIsTheCatalogTail(t *testing.T) {
	l := openLog(t, connect(t, startServer(t)), cluster.LogConfig{})
	if seq, err := l.LastCatalogSeqAll(ctx(t)); err != nil || seq != 0 {
		t.Fatalf("empty log: %d, %v; want 0", seq, err)
	}
	t1, t2 := newSessionID(), newSessionID()
	g1, g2 := newEvents(t), newEvents(t)
	if _, err := l.PublishCatalog(ctx(t), t1, g1.make(t1, event.SessionCreated, "", map[string]any{}), nil); err != nil {
		t.Fatal(err)
	}
	last, err := l.PublishCatalog(ctx(t), t2, g2.make(t2, event.SessionCreated, "", map[string]any{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.PublishStreaming(ctx(t), t1, g1.make(t1, event.TextDelta, "turn_1", map[string]any{"text": "x"})); err != nil {
		t.Fatal(err)
	}
	if seq, err := l.LastCatalogSeqAll(ctx(t)); err != nil || seq != last.Seq {
		t.Fatalf("catalog tail %d, %v; want %d", seq, err, last.Seq)
	}
}

// TestAnnouncementTheServerKeepsTooLongIsLeftOut: a dead node's
// announcement that the server has not expired (here: a bucket whose TTL
// is an hour, listed as if it were 1 s) is left out once it is older
// than twice the TTL plus 5 s, by the server's timestamp.
func TestAnnouncementTheServerKeepsTooLongIsLeftOut(t *testing.T) {
	s := startServer(t)
	cfg := cluster.NodesConfig{Bucket: "metis_nodes_late", TTL: time.Hour, Heartbeat: 100 * time.Millisecond}
	dir := openNodes(t, connect(t, s), cfg)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	a, err := openNodes(t, nc, cfg).Announce(ctx(t), cluster.NodeInfo{Name: "node-a", Started: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close() // the node dies
	late := dir.ListerWithTTL(time.Second)
	if list, err := late.List(ctx(t)); err != nil || len(list) != 1 {
		t.Fatalf("just after the last heartbeat: %v, %v; want node-a", names(list), err)
	}
	waitForWithin(t, 20*time.Second, func() bool {
		list, err := late.List(ctx(t))
		return err == nil && len(list) == 0
	})
	if list, err := dir.List(ctx(t)); err != nil || len(list) != 1 {
		t.Fatalf("the server expired the announcement (%v, %v): the test shows nothing", names(list), err)
	}
	_ = a.Stop(ctx(t))
}
