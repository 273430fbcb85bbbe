package clustertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/natstest"
	"github.com/metis-agent/metis/internal/servertest"
)

func TestMain(m *testing.M) {
	if os.Getenv(procNodeEnv) != "" {
		// A metis node in a process of its own (procnode_test.go).
		os.Exit(runProcNode())
	}
	if os.Getenv(natsProcEnv) != "" {
		// A NATS server in a process of its own (natsproc_test.go).
		os.Exit(runNATSProc())
	}
	code := m.Run()
	// The tests' HTTP requests use the default client: its idle
	// keep-alive connections are not leaks.
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startNATS runs a NATS server with JetStream on a temporary directory,
// listening on a random loopback port; it shuts down when the test
// ends (after the metis servers, whose cleanups run first).
func startNATS(t *testing.T) string {
	t.Helper()
	return natstest.Start(t).URL
}

// node starts a metis server in cluster mode on its own home.
func node(t *testing.T, natsURL, name string) *servertest.Harness {
	t.Helper()
	return servertest.Start(t, "", func(c *config.Config) {
		c.NATS = natsURL
		c.Node = name
		c.DemoDelay = time.Millisecond
	})
}

// openLog opens the nodes' log for a test, with nc from natstest.Connect.
func openLog(t testing.TB, ctx context.Context, nc *nats.Conn) *cluster.Log {
	t.Helper()
	lg, err := cluster.OpenLog(ctx, nc, cluster.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return lg
}

// leaseHolder returns the node holding a tree's lease ("" if none). It
// reads the bucket's key without opening it as a node would (which
// would write the bucket's TTL).
func leaseHolder(t *testing.T, natsURL, tree string) string {
	t.Helper()
	_, js := natstest.Connect(t, natsURL)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, cluster.DefaultLeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, tree)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Node string `json:"node"`
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		t.Fatalf("lease of %s: %v", tree, err)
	}
	return v.Node
}
