package clustertest_test

import (
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestFollowerStopsWhileTheServerPings: a follower stops as soon as its
// test ends, even on a connection the server keeps alive with
// heartbeats (a ping within every read's silence bound, so no read
// ever times out): its cleanup must not wait for a read that never
// ends.
func TestFollowerStopsWhileTheServerPings(t *testing.T) {
	url := startNATS(t)
	h := servertest.Start(t, "", func(c *config.Config) {
		c.NATS, c.Node = url, "node-a"
		c.PingInterval = 20 * time.Millisecond
	})
	sid := h.CreateSession()
	f := follow(t, "a's client", sid, on(h.URL))
	// Heartbeats keep the connection live: no read of it times out.
	f.waitPings(t, 3, wait)
	began := time.Now()
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the follower stopped in %v; %s", time.Since(began), f.summary())
}
