package clustertest_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
)

// Fault tests (docs/scale-out.md, "Faults"): a Jepsen-style run of
// three nodes, a client of the session on each, through one fault,
// checked against the log with checkDelivery: no client may lose,
// get twice, get out of order, or get late (after its turn's end, or
// not in the log at all) any event.

// faultRunsEnv repeats each fault test's run this many times (default
// 1; CI runs them once, a soak test more).
const faultRunsEnv = "METIS_FAULT_RUNS"

// faultRuns returns how often to repeat a fault test's run.
func faultRuns(t *testing.T) int {
	t.Helper()
	v := os.Getenv(faultRunsEnv)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count", faultRunsEnv, v)
	}
	return n
}

// pauseTTL is the lease TTL of the pause tests; the owner is paused for
// pauseFor, well past it.
const (
	pauseTTL = 2 * time.Second
	pauseFor = 3 * pauseTTL
)

// pauseNode starts an in-process node with the pause tests' lease TTL.
func pauseNode(t testing.TB, natsURL, name string) *servertest.Harness {
	t.Helper()
	return servertest.Start(t, "", func(c *config.Config) {
		c.NATS, c.Node, c.LeaseTTL = natsURL, name, pauseTTL
		c.DemoDelay = 5 * time.Millisecond
	})
}

// TestPausedOwnerLeavesEveryClientWhole: the owner of a tree, node a
// (a process of its own), is paused (SIGSTOP) while a turn streams, for
// three times the lease TTL. A turn submitted to node c meanwhile is
// answered once a's lease expired (202, or 503 owner_unavailable to
// retry until it is accepted; never a router timeout's 502), by
// whichever node took the tree, and streams; then a resumes (SIGCONT)
// while it streams. a's
// client reconnects first to a (the deposed owner: it must answer in
// time), then to c; b's and c's clients stay. Each client, checked
// against the log through the second turn's end, lost, duplicated,
// misordered and got late no event (a deposed owner's delta after its
// turn ended, or one the log does not hold).
func TestPausedOwnerLeavesEveryClientWhole(t *testing.T) {
	for i := range faultRuns(t) {
		t.Run(fmt.Sprintf("run %d", i+1), pausedOwnerRun)
	}
}

func pausedOwnerRun(t *testing.T) {
	url := startNATS(t)
	a := startProcNode(t, url, "node-a", pauseTTL, 5*time.Millisecond)
	b, c := pauseNode(t, url, "node-b"), pauseNode(t, url, "node-c")
	sid := a.CreateSession()
	visible(t, b, sid)
	visible(t, c, sid)
	fa := follow(t, "a's client", sid, func(n int) string {
		if n <= 1 {
			return a.URL // and its first reconnect: the deposed owner
		}
		return c.URL
	})
	fb, fc := follow(t, "b's client", sid, on(b.URL)), follow(t, "c's client", sid, on(c.URL))
	followers := []*follower{fa, fb, fc}

	turn1 := a.Submit(sid, "/long 2000")
	for _, f := range followers {
		f.waitFor(t, "deltas of the first turn", wait, deltasOf(turn1, 20))
	}
	a.Pause(t)
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			a.Resume(t)
		}
	}()

	// A turn submitted meanwhile is answered once the lease is free.
	var turn2 string
	for {
		var r struct {
			TurnID string `json:"turn_id"`
		}
		asked := time.Now()
		st := c.Do(http.MethodPost, "/sessions/"+sid+"/turns", map[string]string{"content": "/long 300"}, &r)
		t.Logf("a submit to node c while node a is paused: %d after %s (%s since the pause)", st, time.Since(asked).Round(time.Millisecond), time.Since(paused).Round(time.Millisecond))
		if st == http.StatusAccepted {
			turn2 = r.TurnID
			break
		}
		if st != http.StatusServiceUnavailable {
			t.Fatalf("a turn submitted while the owner is paused: %d, want 202 or 503 owner_unavailable", st)
		}
		if time.Since(paused) > takeBound {
			t.Fatalf("no node took the tree of a paused owner within %s (its lease TTL %s)", takeBound, pauseTTL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	answered := time.Since(paused)
	owner := leaseHolder(t, url, sid)
	if owner != "node-b" && owner != "node-c" {
		t.Fatalf("after the pause the lease is held by %q", owner)
	}
	t.Logf("the second turn was accepted %s after the pause (lease TTL %s), by %s", answered.Round(time.Millisecond), pauseTTL, owner)
	newOwner := b
	if owner == "node-c" {
		newOwner = c
	}
	if got := metric(t, newOwner, `metis_cluster_failovers_total{trigger="lease_expired"}`) +
		metric(t, newOwner, `metis_cluster_failovers_total{trigger="request"}`); got != 1 {
		t.Errorf("the new owner counted %v failovers, want 1", got)
	}
	for _, f := range []*follower{fb, fc} {
		f.waitFor(t, "the first turn's end", wait, sawType(event.TurnCancelled, turn1))
		f.waitFor(t, "deltas of the second turn", wait, deltasOf(turn2, 20))
	}
	if d := time.Until(paused.Add(pauseFor)); d > 0 {
		time.Sleep(d)
	}
	a.Resume(t)
	resumed = true

	for _, f := range followers {
		f.waitFor(t, "the second turn's end", 90*time.Second, sawType(event.TurnCompleted, turn2))
	}
	logged := logEvents(t, url, sid)
	valid := validEvents(logged, sid)
	end := ""
	for _, e := range valid {
		if e.Type == event.TurnCompleted && e.TurnID == turn2 {
			end = e.ID
		}
	}
	if end == "" {
		t.Fatalf("the log holds no turn.completed of %s", turn2)
	}
	for _, f := range followers {
		d := checkDelivery(f, valid, end)
		t.Logf("%s: lost %d, duplicated %d, misordered %d, late %d (excused by a streaming gap: %d); %s",
			f.name, d.Lost, d.Duplicated, d.Misordered, d.Late, d.Excused, f.summary())
		if !d.ok() {
			t.Errorf("%s: lost %d, duplicated %d, misordered %d, late %d: %q", f.name, d.Lost, d.Duplicated, d.Misordered, d.Late, d.Examples)
		}
	}
	// The deposed owner answered its client's reconnect in time.
	if s := fa.slowestAnswer(); s > followerAnswerBound {
		t.Errorf("a subscribe of a's client waited %s for its answer (bound %s)", s, followerAnswerBound)
	}
}

// takeBound is how long a turn submitted while the owner is paused may
// take to be accepted: the lease TTL, then the new owner's takeover
// (its feed catching up with the old owner's deltas, the old turn
// ended), which a loaded machine makes seconds; the time itself is
// BenchmarkFailoverAfterPause's to measure.
const takeBound = time.Minute

// followerAnswerBound is how long a subscribe may wait for its answer in
// the fault tests: a node that follows a tree for the first time reads
// the log (bounded by 30 s on a loaded machine), so only a stall well
// past a normal start fails.
const followerAnswerBound = 8 * time.Second
