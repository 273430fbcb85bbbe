package clustertest_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/natstest"
	"github.com/metis-agent/metis/internal/servertest"
)

// metric reads one sample of node h's /metrics (its registry, which
// outlives the server's shutdown): series is the name with its labels
// as the text format writes them. A missing series fails the test.
func metric(t *testing.T, h *servertest.Harness, series string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.Server.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	t.Fatalf("no series %s in node %s's metrics", series, h.Config.Node)
	return 0
}

// TestClusterMetricsMove: each node's /metrics follows its part in the
// cluster: leases taken and lost (released, lost, fenced), fenced
// publishes, requests routed to owners by kind and result, feeds,
// trees owned, reads that caught up, and the projection's lag behind
// the log, which grows while the projection is held and returns to 0.
func TestClusterMetricsMove(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	if got := metric(t, a, "metis_cluster_lease_acquisitions_total"); got != 1 {
		t.Fatalf("node a took %v leases, want 1", got)
	}
	if got := metric(t, a, "metis_cluster_owned_trees"); got != 1 {
		t.Fatalf("node a owns %v trees, want 1", got)
	}

	// Requests routed by node b, by kind and result.
	turn := b.Submit(sid, "hello")
	a.WaitTurn(sid)
	var refusal map[string]any
	if st := b.Do(http.MethodPost, "/sessions/"+sid+"/turns/"+turn+"/feedback", map[string]string{"rating": "meh"}, &refusal); st != http.StatusBadRequest {
		t.Fatalf("bad feedback through node b: %d %v", st, refusal)
	}
	if st := b.Do(http.MethodPost, "/sessions/"+sid+"/turns/"+turn+"/cancel", nil, nil); st != http.StatusAccepted {
		t.Fatalf("cancel of an ended turn through node b: %d", st)
	}
	for series, want := range map[string]float64{
		`metis_cluster_routed_requests_total{kind="submit",result="ok"}`:        1,
		`metis_cluster_routed_requests_total{kind="feedback",result="refused"}`: 1,
		`metis_cluster_routed_requests_total{kind="cancel",result="ok"}`:        1,
	} {
		if got := metric(t, b, series); got != want {
			t.Errorf("node b: %s = %v, want %v", series, got, want)
		}
	}

	// A feed runs while node b has a client of the tree.
	c := attach(t, b, sid)
	if got := metric(t, b, "metis_cluster_feeds"); got != 1 {
		t.Fatalf("node b runs %v feeds with a client, want 1", got)
	}
	c.Close()
	servertest.WaitFor(t, "node b's feed to stop", func() bool { return metric(t, b, "metis_cluster_feeds") == 0 })

	// The projection's lag grows while it is held, and a read waits for
	// it to catch up.
	servertest.WaitFor(t, "node b's projection to catch up", func() bool { return metric(t, b, "metis_cluster_projection_lag") == 0 })
	caughtUp := metric(t, b, `metis_cluster_read_catchups_total{result="caught_up"}`)
	release := stall(t, b)
	sid2 := a.CreateSession()
	if got := metric(t, b, "metis_cluster_projection_lag"); got < 1 {
		t.Fatalf("node b's projection lag is %v while it cannot apply a new session, want at least 1", got)
	}
	whileStalled(t, release, func() {
		if st := b.Do(http.MethodGet, "/sessions/"+sid2, nil, nil); st != http.StatusOK {
			t.Errorf("GET the new session on node b: %d", st)
		}
	})
	if got := metric(t, b, `metis_cluster_read_catchups_total{result="caught_up"}`); got != caughtUp+1 {
		t.Errorf("node b's reads that caught up: %v, want %v", got, caughtUp+1)
	}
	servertest.WaitFor(t, "node b's projection to catch up again", func() bool { return metric(t, b, "metis_cluster_projection_lag") == 0 })

	// A lease that disappears (deleted here; an expiry is the same to
	// its holder) is lost at the next renewal.
	nc, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	kv, err := js.KeyValue(ctx, cluster.DefaultLeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, sid2); err != nil {
		t.Fatal(err)
	}
	servertest.WaitFor(t, "node a to notice its lost lease", func() bool {
		return metric(t, a, `metis_cluster_lease_losses_total{reason="lost"}`) == 1
	})

	// Another writer claims sid's tree in the log: node a's next catalog
	// publish there is refused.
	lg, err := cluster.OpenLog(ctx, nc, cluster.LogConfig{Retention: a.Config.Retention})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Claim(ctx, sid, "intruder", 0); err != nil {
		t.Fatal(err)
	}
	if st := a.Do(http.MethodPost, "/sessions/"+sid+"/turns/"+turn+"/feedback", map[string]string{"rating": "up"}, nil); st < 500 {
		t.Fatalf("feedback on a fenced owner: %d, want a failure", st)
	}
	servertest.WaitFor(t, "node a's fenced lease", func() bool {
		return metric(t, a, `metis_cluster_lease_losses_total{reason="fenced"}`) == 1
	})
	if got := metric(t, a, "metis_cluster_fenced_publishes_total"); got != 1 {
		t.Fatalf("node a's fenced publishes: %v, want 1", got)
	}
	if got := metric(t, a, "metis_cluster_owned_trees"); got != 0 {
		t.Fatalf("node a owns %v trees after losing both, want 0", got)
	}
	for _, e := range a.Live.Events(sid) {
		if e.Type == event.FeedbackSubmitted && strings.Contains(string(e.Payload), `"rating":"up"`) {
			t.Fatalf("the fenced owner delivered %s", e.ID)
		}
	}

	// A node that shuts down releases the trees it owns.
	sid3 := b.CreateSession()
	b.Stop()
	if got := metric(t, b, `metis_cluster_lease_losses_total{reason="released"}`); got != 1 {
		t.Fatalf("node b released %v leases on shutdown (it owned %s), want 1", got, sid3)
	}
}
