package clustertest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/natstest"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestReadyLineNamesTheClusterAndNode: the ready line of a node keeps
// everything a single-node server prints and adds its node name, the
// NATS server (or cluster) and the stream.
func TestReadyLineNamesTheClusterAndNode(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		readyLineNames(t, natstest.Start(t).URL, "nats metis-test,")
	})
	t.Run("cluster", func(t *testing.T) {
		readyLineNames(t, natstest.StartCluster(t, 3).URLs(), "nats metis-test-cluster,")
	})
}

// readyLineNames starts a node against url and checks its ready line
// names the node, the stream, and the NATS server or cluster as want.
func readyLineNames(t *testing.T, url, want string) {
	cfg := config.Defaults()
	cfg.Home, cfg.Addr, cfg.NATS, cfg.Node = t.TempDir(), "127.0.0.1:0", url, "node-r"
	srv, err := server.New(context.Background(), cfg, nil)
	servertest.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	out := &servertest.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, out) }()
	servertest.WaitFor(t, "the ready line", func() bool { return strings.Contains(out.String(), "\n") })
	cancel()
	select {
	case err := <-done:
		servertest.Must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop")
	}
	line := strings.TrimSpace(out.String())
	for _, want := range []string{"metis serving http://127.0.0.1:", "; dashboard http://127.0.0.1:", "; cluster node node-r (" + want + " stream METIS_EVENTS)"} {
		if !strings.Contains(line, want) {
			t.Errorf("ready line %q lacks %q", line, want)
		}
	}
}
