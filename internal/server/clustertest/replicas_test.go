package clustertest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/natstest"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestNATSReplicasSetsTheStreamsReplicas: --nats-replicas (config key
// nats_replicas) sets the replicas of the log's stream and of the lease
// bucket, here 1 on a three-server NATS cluster (which would otherwise
// get 3); a value JetStream cannot keep is refused before connecting.
func TestNATSReplicasSetsTheStreamsReplicas(t *testing.T) {
	nc := natstest.StartCluster(t, 3)
	servertest.Start(t, "", func(c *config.Config) {
		c.NATS, c.Node, c.NATSReplicas = nc.URLs(), "node-a", 1
	})
	_, js := natstest.Connect(t, nc.URLs())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, cluster.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 1 {
		t.Fatalf("the stream has %d replicas, want 1", info.Config.Replicas)
	}
	kv, err := js.KeyValue(ctx, cluster.DefaultLeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := ks.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas; r != 1 {
		t.Fatalf("the lease bucket has %d replicas, want 1", r)
	}

	cfg := config.Defaults()
	cfg.Home, cfg.Addr, cfg.NATS, cfg.Node, cfg.NATSReplicas = t.TempDir(), "127.0.0.1:0", nc.URLs(), "node-b", 6
	if _, err := server.New(t.Context(), cfg, nil); err == nil || !strings.Contains(err.Error(), "--nats-replicas") {
		t.Fatalf("server.New with --nats-replicas 6: %v", err)
	}
}
