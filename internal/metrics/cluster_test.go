package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/metrics"
)

type fakeSource struct {
	lag     float64
	lagOK   bool
	applied float64
	skipped float64
	feeds   float64
	owned   float64
	refused float64
	unsent  float64
	late    float64
	gaps    float64
}

func (f *fakeSource) ProjectionLag() (float64, bool) { return f.lag, f.lagOK }
func (f *fakeSource) ProjectionApplied() float64     { return f.applied }
func (f *fakeSource) ProjectionSkipped() float64     { return f.skipped }
func (f *fakeSource) Feeds() float64                 { return f.feeds }
func (f *fakeSource) OwnedTrees() float64            { return f.owned }
func (f *fakeSource) StreamingRefused() float64      { return f.refused }
func (f *fakeSource) StreamingUnsent() float64       { return f.unsent }
func (f *fakeSource) LateEvents() float64            { return f.late }
func (f *fakeSource) StreamGaps() float64            { return f.gaps }

func scrape(t *testing.T, r *metrics.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func hasLine(t *testing.T, text, line string) {
	t.Helper()
	for l := range strings.Lines(text) {
		if strings.TrimSpace(l) == line {
			return
		}
	}
	t.Errorf("metrics lack %q", line)
}

// TestClusterMetricsMove: the cluster collectors read their source at
// each scrape and count lease changes, fenced publishes, routed
// requests, read catch-ups, meta-events of clients of trees owned
// elsewhere, failovers, dropped streaming publishes, deposed owners'
// late events and gaps, with no ids in their labels.
func TestClusterMetricsMove(t *testing.T) {
	r := metrics.New()
	src := &fakeSource{lag: 3, lagOK: true, applied: 120, skipped: 1, feeds: 2, owned: 4}
	c := r.NewCluster(src)
	text := scrape(t, r)
	for _, l := range []string{
		"metis_cluster_projection_lag 3",
		"metis_cluster_projection_applied_sequence 120",
		"metis_cluster_projection_skipped_records_total 1",
		"metis_cluster_feeds 2",
		"metis_cluster_owned_trees 4",
		"metis_cluster_lease_acquisitions_total 0",
		`metis_cluster_lease_losses_total{reason="fenced"} 0`,
		"metis_cluster_fenced_publishes_total 0",
		`metis_cluster_meta_events_total{result="dropped"} 0`,
		`metis_cluster_failovers_total{trigger="lease_expired"} 0`,
		`metis_cluster_streaming_publishes_dropped_total{reason="refused"} 0`,
		"metis_cluster_late_events_discarded_total 0",
		"metis_cluster_stream_gaps_total 0",
	} {
		hasLine(t, text, l)
	}

	src.lag, src.feeds = 0, 1
	src.refused, src.unsent, src.late, src.gaps = 268, 3, 2, 1
	c.FailoverInc(metrics.FailoverLeaseExpired)
	c.FailoverInc(metrics.FailoverRequest)
	c.FailoverInc(metrics.FailoverRequest)
	c.LeaseAcquiredInc()
	c.LeaseAcquiredInc()
	c.LeaseEnded(metrics.LeaseReleased)
	c.LeaseEnded(metrics.LeaseFenced)
	c.RoutedInc("submit", "ok")
	c.RoutedInc("feedback", "refused")
	c.ReadCatchUp(metrics.CatchUpCaughtUp)
	c.MetaEvent(metrics.MetaRouted)
	c.MetaEvent(metrics.MetaDropped)
	c.MetaEvent(metrics.MetaDropped)
	text = scrape(t, r)
	for _, l := range []string{
		"metis_cluster_projection_lag 0",
		"metis_cluster_feeds 1",
		"metis_cluster_lease_acquisitions_total 2",
		`metis_cluster_lease_losses_total{reason="released"} 1`,
		`metis_cluster_lease_losses_total{reason="fenced"} 1`,
		`metis_cluster_lease_losses_total{reason="lost"} 0`,
		"metis_cluster_fenced_publishes_total 1",
		`metis_cluster_routed_requests_total{kind="submit",result="ok"} 1`,
		`metis_cluster_routed_requests_total{kind="feedback",result="refused"} 1`,
		`metis_cluster_read_catchups_total{result="caught_up"} 1`,
		`metis_cluster_meta_events_total{result="routed"} 1`,
		`metis_cluster_meta_events_total{result="dropped"} 2`,
		`metis_cluster_meta_events_total{result="failed"} 0`,
		`metis_cluster_failovers_total{trigger="lease_expired"} 1`,
		`metis_cluster_failovers_total{trigger="request"} 2`,
		`metis_cluster_streaming_publishes_dropped_total{reason="refused"} 268`,
		`metis_cluster_streaming_publishes_dropped_total{reason="unsent"} 3`,
		"metis_cluster_late_events_discarded_total 2",
		"metis_cluster_stream_gaps_total 1",
	} {
		hasLine(t, text, l)
	}

	// A log that cannot be asked shows as NaN, not as a lag of 0.
	src.lagOK = false
	hasLine(t, scrape(t, r), "metis_cluster_projection_lag NaN")

	// A nil *Cluster (single-node mode) records nothing and does not
	// panic.
	var none *metrics.Cluster
	none.LeaseAcquiredInc()
	none.LeaseEnded(metrics.LeaseLost)
	none.RoutedInc("cancel", "ok")
	none.ReadCatchUp("timeout")
	none.MetaEvent(metrics.MetaFailed)
	none.FailoverInc(metrics.FailoverRequest)
}
