package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds a server's start, and a cluster's forming: they
// are generous for a loaded 2-core machine running -race.
const readyTimeout = 30 * time.Second

// Server is one running NATS server.
type Server struct {
	*server.Server
	// URL is the server's client URL (nats://127.0.0.1:PORT).
	URL string
}

// Start runs a standalone NATS server with JetStream on a temporary
// directory, listening on a random loopback port. It shuts down when
// the test ends (cleanups registered later, such as a metis node's,
// run first).
func Start(t testing.TB) *Server {
	t.Helper()
	s := start(t, &server.Options{ServerName: "metis-test", Host: "127.0.0.1", Port: -1})
	if !s.ReadyForConnections(readyTimeout) {
		t.Fatal("natstest: server not ready")
	}
	return s
}

// Cluster is a NATS cluster of servers routed to each other.
type Cluster struct {
	Name    string
	Servers []*Server
}

// URLs returns every server's client URL joined with commas, the form
// a NATS client (and metis's --nats) accepts for a cluster.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL
	}
	return strings.Join(urls, ",")
}

// StartCluster runs n servers (n ≥ 3 for JetStream replicas 3) in one
// NATS cluster on loopback ports, and waits until JetStream has a meta
// leader that can place a stream's replicas on every server, so a
// stream with n replicas can be created at once. They shut
// down when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	var c *Cluster
	for attempt := 1; c == nil; attempt++ {
		var late string
		c, late = startCluster(t, n)
		if c != nil {
			break
		}
		// The route ports were free when picked, but another process
		// of a busy machine may have taken one before its server
		// listened: that server never gets ready. Fresh ports, again.
		if attempt == clusterAttempts {
			t.Fatalf("natstest: %s not ready (%d attempts)", late, attempt)
		}
		t.Logf("natstest: %s not ready; starting the cluster again on fresh ports", late)
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		if leaderKnown(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal("natstest: the cluster elected no JetStream meta leader")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterAttempts bounds how often StartCluster starts a cluster whose
// servers did not all get ready.
const clusterAttempts = 3

// startCluster starts n servers routed to each other on fresh ports and
// waits until each accepts connections. If one does not within
// readyTimeout, every server is shut down and its name returned.
func startCluster(t testing.TB, n int) (*Cluster, string) {
	t.Helper()
	ports := freePorts(t, n)
	routes := make([]*url.URL, n)
	for i, p := range ports {
		routes[i] = &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)}
	}
	c := &Cluster{Name: "metis-test-cluster"}
	for i := range n {
		c.Servers = append(c.Servers, start(t, &server.Options{
			ServerName: fmt.Sprintf("metis-test-%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			Cluster:    server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: ports[i]},
			Routes:     routes,
		}))
	}
	deadline := time.Now().Add(readyTimeout)
	for _, s := range c.Servers {
		if !s.ReadyForConnections(time.Until(deadline)) {
			for _, s := range c.Servers {
				s.Shutdown()
			}
			return nil, s.Name()
		}
	}
	return c, ""
}

// leaderKnown reports whether every server is routed to all the others
// and one is the JetStream meta leader that counts every server as a
// peer a stream's replicas can be placed on (online, with JetStream,
// its statistics received): without that, a stream of len(Servers)
// replicas created at once fails with "no suitable peers for placement"
// (on a loaded machine the statistics can come seconds after the
// election).
func leaderKnown(c *Cluster) bool {
	for _, s := range c.Servers {
		if s.NumRoutes() < len(c.Servers)-1 {
			return false
		}
	}
	for _, s := range c.Servers {
		if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(c.Servers) {
			return true
		}
	}
	return false
}

// start creates and starts a server with JetStream on a temporary
// directory, shut down when the test ends.
func start(t testing.TB, opts *server.Options) *Server {
	t.Helper()
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	opts.NoLog = true
	opts.NoSigs = true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return &Server{Server: s, URL: s.ClientURL()}
}

// freePorts reserves n loopback ports for the cluster's routes, which
// must all be known before the first server starts.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: free port: %v", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}
