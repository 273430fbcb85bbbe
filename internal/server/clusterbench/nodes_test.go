package clusterbench_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/natstest"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/session"
)

// node is one running metis server (single-node or a cluster node).
type node struct {
	name string
	srv  *server.Server
	url  string // http://127.0.0.1:PORT
	hc   *http.Client
	home string
	ws   string // a workspace directory for its sessions
}

// startNode starts a metis server on a loopback port with the defaults
// as set changes them, on home (a fresh one if ""). It does not use
// servertest.Start, whose recording live sink keeps every event (a cost
// production does not have). It is shut down when the benchmark ends,
// before the NATS servers it uses (registered earlier).
func startNode(tb testing.TB, name, home string, set func(*config.Config)) *node {
	tb.Helper()
	if home == "" {
		home = tb.TempDir()
	}
	n := &node{name: name, home: home, hc: &http.Client{Transport: &http.Transport{}}}
	n.ws = filepath.Join(n.home, "workspace")
	if err := os.MkdirAll(n.ws, 0o755); err != nil {
		tb.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Home, cfg.Addr = n.home, "127.0.0.1:0"
	cfg.DemoDelay = 0
	// Nobody is closed as slow: the benchmarks count every frame.
	cfg.ClientQueue, cfg.ClientQueueBytes = 100_000, 256<<20
	if set != nil {
		set(&cfg)
	}
	srv, err := server.New(context.Background(), cfg, benchLogger())
	if err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	url, err := srv.Listen()
	if err != nil {
		tb.Fatalf("listen %s: %v", name, err)
	}
	n.srv, n.url = srv, url
	tb.Cleanup(func() { n.stop(tb) })
	return n
}

// stop shuts the node down (once).
func (n *node) stop(tb testing.TB) {
	if n.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.srv.Shutdown(ctx); err != nil {
		tb.Errorf("shutdown %s: %v", n.name, err)
	}
	n.hc.CloseIdleConnections()
	n.srv = nil
}

func benchLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// system is one of the compared systems: single-node metis, or metis
// nodes on a NATS log with one or three replicas. nodes[0] creates the
// benchmarks' sessions, so it owns their trees; the others follow
// them.
type system struct {
	name  string // "single", "r1", "r3"
	nodes []*node
	urls  []string // the NATS URL nodes[i] connects to ("" single-node)
}

// Names of the compared systems, as they appear in metric names.
const (
	sysSingle = "single"
	sysR1     = "r1" // metis nodes on one NATS server, stream replicas 1
	sysR3     = "r3" // metis nodes on a three-server NATS cluster, replicas 3
)

// startSystem starts system name with n metis nodes (1 for single).
// For r3 node i connects to NATS server i mod 3, so the nodes are spread
// over the cluster's servers; for r1 all connect to the one server.
func startSystem(tb testing.TB, name string, n int, set func(*config.Config)) *system {
	tb.Helper()
	s := &system{name: name}
	switch name {
	case sysSingle:
		n, s.urls = 1, []string{""}
	case sysR1:
		url := natstest.Start(tb).URL
		for range n {
			s.urls = append(s.urls, url)
		}
	case sysR3:
		c := natstest.StartCluster(tb, 3)
		for i := range n {
			s.urls = append(s.urls, c.Servers[i%len(c.Servers)].URL)
		}
	default:
		tb.Fatalf("no system %q", name)
	}
	for i := range n {
		nodeName := fmt.Sprintf("node-%c", 'a'+i)
		s.nodes = append(s.nodes, startNode(tb, name+"-"+nodeName, "", func(c *config.Config) {
			if s.urls[i] != "" {
				c.NATS, c.Node = s.urls[i], nodeName
			}
			if set != nil {
				set(c)
			}
		}))
	}
	return s
}

// session creates a session on nodes[0] (which then owns its tree),
// waits until every node's projection shows it, and returns it with
// the owner's emitter (the model adapter's way into the bus).
func (s *system) session(tb testing.TB, model string) (string, *bus.Emitter) {
	tb.Helper()
	ctx := context.Background()
	owner := s.nodes[0]
	sum, err := owner.srv.Sessions.Create(ctx, session.CreateRequest{WorkspacePath: owner.ws, Model: model})
	if err != nil {
		tb.Fatalf("%s: create session: %v", s.name, err)
	}
	for _, n := range s.nodes[1:] {
		waitUntil(tb, "session "+sum.ID+" on "+n.name, func() bool {
			_, err := n.srv.Store.Session(ctx, sum.ID)
			return err == nil
		})
	}
	em, err := owner.srv.Bus.Emitter(ctx, sum.ID)
	if err != nil {
		tb.Fatal(err)
	}
	return sum.ID, em
}

// waitUntil polls cond for up to a minute (the machine is loaded).
func waitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
