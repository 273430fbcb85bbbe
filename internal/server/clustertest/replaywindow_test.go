package clustertest_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
)

// TestClusterReplayWindowEqualsStore: in cluster mode, a node that
// follows a tree another node owns fills its replay windows from its
// projection, and for random sequences of turns (submitted to either
// node, so windows of a small cap are trimmed and evicted) and cursors
// (inside a window, at the newest event, older than it), a reconnecting
// client's replay of every catalog type, over the WebSocket and over
// SSE, on the owner and on the follower, is that node's store's answer
// byte for byte. Across the run, the follower served replays from
// memory.
func TestClusterReplayWindowEqualsStore(t *testing.T) {
	if testing.Short() {
		t.Skip("turns on two nodes")
	}
	natsURL := startNATS(t)
	small := func(c *config.Config) {
		c.ReplayWindowBytes = 6 << 10
		c.ReplayLimit = 200
	}
	owner := servertest.Start(t, "", func(c *config.Config) { c.NATS, c.Node, c.DemoDelay = natsURL, "node-a", time.Millisecond }, small)
	follower := servertest.Start(t, "", func(c *config.Config) { c.NATS, c.Node, c.DemoDelay = natsURL, "node-b", time.Millisecond }, small)
	nodes := []*servertest.Harness{owner, follower}
	catalog := benchtest.CatalogTypes()
	rapid.Check(t, func(rt *rapid.T) {
		sid := owner.CreateSession()
		for step := range rapid.IntRange(1, 3).Draw(rt, "steps") {
			for i := range rapid.IntRange(1, 3).Draw(rt, fmt.Sprintf("turns%d", step)) {
				at := rapid.SampledFrom(nodes).Draw(rt, fmt.Sprintf("at%d.%d", step, i))
				at.Submit(sid, fmt.Sprintf("/echo turn %d.%d", step, i))
				owner.WaitTurn(sid)
			}
			last := lastStored(t, owner, sid)
			eventually(t, "the follower's projection", func() bool { return lastStored(t, follower, sid) >= last })
			stored, err := follower.Server.Store.Events(t.Context(), store.EventQuery{SessionIDs: []string{sid}})
			if err != nil {
				rt.Fatal(err)
			}
			if len(stored) < 2 {
				continue
			}
			back := rapid.IntRange(1, len(stored)-1).Draw(rt, fmt.Sprintf("back%d", step))
			since := stored[len(stored)-back].ID
			for _, h := range rapid.Permutation(nodes).Draw(rt, fmt.Sprintf("order%d", step)) {
				for _, tr := range streamtest.Transports {
					h.CheckReplay(rt, tr, sid, since, catalog, nil)
				}
			}
		}
	})
	got := follower.ReplayCounts()
	if got["memory"] == 0 || got["mixed"]+got["store"] == 0 {
		t.Fatalf("the follower's replays by source %v: want some from memory and some reading its store", got)
	}
	t.Logf("the follower's replays by source: %v; the owner's: %v", got, owner.ReplayCounts())
}
