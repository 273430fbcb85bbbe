package clustertest_test

import (
	"context"
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

// leaseHolder returns the node holding a tree's lease.
func leaseHolder(t *testing.T, natsURL, tree string) string {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := cluster.OpenLeases(ctx, js, "clustertest", cluster.LeaseConfig{})
	if err != nil {
		t.Fatal(err)
	}
	holder, _, err := ls.Holder(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	return holder
}
