package clustertest_test

// Contract §11's first bullet over three nodes: a snapshot taken on a
// node that does not own the tree, while the owner streams an answer.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/streamtest"
)

// TestCluster11_MidStreamSnapshotOnNonOwners: the snapshot property on
// the two nodes that relay the tree (node 1 keeps a client attached, so
// its feed runs; node 2 has none between checks, so its first client
// may start its feed and backfill its ring from the log): a client that
// attaches there with snapshot: true at any moment of a streamed answer
// finds it with status streaming and its content so far, and that
// content followed by the deltas after the seam is exactly
// message.complete's final content. The owner runs turns back to back
// (thinking, text and tool input; a long answer; a longer tool input).
func TestCluster11_MidStreamSnapshotOnNonOwners(t *testing.T) {
	tri := startTrio(t, withQueue(100_000))
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		sid := tri.session()
		owner := tri.owner()
		keep, _, _ := subscribe(t, tr, tri.nodes[1], sid, "preset:full", nil, false)
		defer keep.Close()
		prompts := []string{
			"what is in my workspace?",
			"/long 40",
			`/tool read_file {"path": "a/rather/long/path/to/a/file/that/is/not/there.txt"}`,
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		driverErr := make(chan error, 1)
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if st := owner.Do(http.MethodPost, "/sessions/"+sid+"/turns", map[string]string{"content": prompts[i%len(prompts)]}, nil); st != http.StatusAccepted {
					driverErr <- fmt.Errorf("submit: status %d", st)
					return
				}
				if err := owner.Server.Sessions.Wait(context.Background(), sid); err != nil {
					driverErr <- err
					return
				}
			}
		})
		defer func() {
			stop()
			wg.Wait()
			select {
			case err := <-driverErr:
				t.Fatalf("the turns driver stopped: %v", err)
			default:
			}
		}()
		// A fixed number of attaches, each after a random pause, on a
		// random non-owner (three NATS servers and three nodes under the
		// race detector make each one costly; the single-node suite
		// draws a hundred per transport with rapid).
		const attaches = 12
		inFlight := 0
		for i := range attaches {
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
			node := tri.nodes[1+i%2]
			c, _, snap := subscribe(t, tr, node, sid, "preset:chat", nil, true)
			if streamtest.CheckContinues(t, c, specRead, snap) {
				inFlight++
			}
			c.Close()
		}
		t.Logf("%d of %d snapshots on non-owners were taken while an answer streamed", inFlight, attaches)
		if inFlight == 0 {
			t.Fatal("no snapshot was taken while an answer streamed: the test did not exercise the property")
		}
	})
}
