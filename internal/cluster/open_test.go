package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/natstest"
)

// TestNodesStartingTogetherOnAFreshClusterAllOpen: three nodes, each on
// its own server of a fresh three-server cluster, open the log, the
// lease bucket and the node directory at the same moment (a cluster's first start): every one
// gets them, with three replicas.
func TestNodesStartingTogetherOnAFreshClusterAllOpen(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	var wg sync.WaitGroup
	errs := make([]error, len(c.Servers))
	for i, s := range c.Servers[:3] {
		nc, err := nats.Connect(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			lg, err := cluster.OpenLog(ctx, nc, cluster.LogConfig{})
			if err != nil {
				errs[i] = err
				return
			}
			if r := lg.Config().Replicas; r != 3 {
				errs[i] = fmt.Errorf("log replicas %d, want 3", r)
				return
			}
			if _, errs[i] = cluster.OpenLeases(ctx, lg.JetStream(), fmt.Sprintf("n%d", i), cluster.LeaseConfig{}); errs[i] != nil {
				return
			}
			_, errs[i] = cluster.OpenNodes(ctx, lg.JetStream(), cluster.NodesConfig{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
}

// TestReopeningWithAnotherConfigurationUpdatesIt: a node started with
// another retention or lease TTL than the stream and bucket were
// created with updates them instead of failing.
func TestReopeningWithAnotherConfigurationUpdatesIt(t *testing.T) {
	nc := connect(t, startServer(t))
	openLog(t, nc, cluster.LogConfig{Retention: time.Hour})
	lg := openLog(t, nc, cluster.LogConfig{Retention: 2 * time.Hour})
	info, err := lg.JetStream().Stream(ctx(t), lg.Config().Stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo().Config.MaxAge; got != 2*time.Hour {
		t.Fatalf("stream max age %v after reopening with 2h", got)
	}
	if _, err := cluster.OpenLeases(ctx(t), lg.JetStream(), "a", cluster.LeaseConfig{TTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.OpenLeases(ctx(t), lg.JetStream(), "a", cluster.LeaseConfig{TTL: 7 * time.Second}); err != nil {
		t.Fatalf("reopen the lease bucket with another TTL: %v", err)
	}
	kv, err := lg.JetStream().KeyValue(ctx(t), cluster.DefaultLeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 7*time.Second {
		t.Fatalf("lease bucket TTL %v after reopening with 7s", st.TTL())
	}
}
