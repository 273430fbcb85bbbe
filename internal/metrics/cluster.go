package metrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterSource is what a cluster node reports at each scrape.
type ClusterSource interface {
	// ProjectionLag is the log's last catalog sequence minus the one
	// the node's projection applied through (stream sequences, so the
	// streaming messages in between count too); ok is false when the log
	// could not be asked.
	ProjectionLag() (lag float64, ok bool)
	// ProjectionApplied is the stream sequence the projection applied
	// through.
	ProjectionApplied() float64
	// ProjectionSkipped counts the undecodable records the projection
	// skipped.
	ProjectionSkipped() float64
	// Feeds is the number of per-tree feeds (ordered consumers) running.
	Feeds() float64
	// OwnedTrees is the number of trees this node owns.
	OwnedTrees() float64
	// StreamingRefused counts the streaming events this node sent that
	// the stream refused or did not acknowledge (a gap other nodes'
	// clients are told of); StreamingUnsent those it never sent (it had
	// lost the tree, or could not confirm its lease).
	StreamingRefused() float64
	StreamingUnsent() float64
	// LateEvents counts the events of deposed owners this node's feeds
	// discarded (sent after another node took their tree); StreamGaps
	// the gaps they found (events an owner published that never reached
	// the log) and told their clients of.
	LateEvents() float64
	StreamGaps() float64
}

// Triggers of metis_cluster_failovers_total: why this node took a tree
// over from another owner.
const (
	FailoverLeaseExpired = "lease_expired" // its owner's lease expired or was released (the lease watch)
	FailoverRequest      = "request"       // a routed request or meta-event found no owner
)

// Lease end reasons of metis_cluster_lease_losses_total.
const (
	LeaseReleased = "released" // given up by this node (shutdown, handover)
	LeaseLost     = "lost"     // expired, taken, or not renewed in time
	LeaseFenced   = "fenced"   // a catalog publish was refused: another node claimed the tree
)

// Results of metis_cluster_read_catchups_total.
const (
	CatchUpCurrent  = "current"   // the projection had applied the log's tail already
	CatchUpCaughtUp = "caught_up" // it had not, and did in time
	CatchUpTimeout  = "timeout"   // it did not in time: the read answered from what the store showed
	CatchUpFailed   = "failed"    // the log could not be asked, or the projection stopped
)

// Results of metis_cluster_meta_events_total: what became of a
// meta-event (a subscription registered or unregistered, a slow
// client's warning) of this node's client of a tree owned elsewhere.
const (
	MetaRouted  = "routed"  // the tree's owner emitted it
	MetaLocal   = "local"   // nobody owned the tree: this node took it and emitted it
	MetaDropped = "dropped" // the queue of meta-events to send was full
	MetaFailed  = "failed"  // not emitted: no answer in time, the owner refused it, or the tree could not be taken
)

// Cluster holds a cluster node's collectors. A nil *Cluster is valid
// and records nothing.
type Cluster struct {
	LeaseAcquired   prometheus.Counter
	LeaseLosses     *prometheus.CounterVec // by reason
	FencedPublishes prometheus.Counter
	Routed          *prometheus.CounterVec // by kind and result
	ReadCatchUps    *prometheus.CounterVec // by result
	MetaEvents      *prometheus.CounterVec // by result
	Failovers       *prometheus.CounterVec // by trigger
}

// NewCluster registers the collectors of a cluster node reading src at
// each scrape. Call it once per registry.
func (r *Registry) NewCluster(src ClusterSource) *Cluster {
	c := &Cluster{
		LeaseAcquired: prometheus.NewCounter(prometheus.CounterOpts{Name: "metis_cluster_lease_acquisitions_total",
			Help: "Tree leases this node took."}),
		LeaseLosses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metis_cluster_lease_losses_total",
			Help: "Tree leases this node stopped holding, by reason (released, lost, fenced)."}, []string{"reason"}),
		FencedPublishes: prometheus.NewCounter(prometheus.CounterOpts{Name: "metis_cluster_fenced_publishes_total",
			Help: "Catalog publishes of this node the stream refused because another node claimed the tree."}),
		Routed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metis_cluster_routed_requests_total",
			Help: "Requests this node forwarded to a tree's owner, by kind (submit, cancel, feedback, meta) and result (ok, refused, no_owner, failed)."},
			[]string{"kind", "result"}),
		ReadCatchUps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metis_cluster_read_catchups_total",
			Help: "Reads that first checked the projection against the log's catalog tail, by result (current, caught_up, timeout, failed)."},
			[]string{"result"}),
		MetaEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metis_cluster_meta_events_total",
			Help: "Meta-events of this node's clients of trees owned elsewhere (subscriptions registered and unregistered, slow-client warnings), by result (routed, local, dropped, failed)."},
			[]string{"result"}),
		Failovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metis_cluster_failovers_total",
			Help: "Trees this node took over from another owner (ending the turns it left open), by trigger (lease_expired, request)."},
			[]string{"trigger"}),
	}
	for _, trigger := range []string{FailoverLeaseExpired, FailoverRequest} {
		c.Failovers.WithLabelValues(trigger)
	}
	for _, reason := range []string{LeaseReleased, LeaseLost, LeaseFenced} {
		c.LeaseLosses.WithLabelValues(reason)
	}
	for _, result := range []string{CatchUpCurrent, CatchUpCaughtUp, CatchUpTimeout, CatchUpFailed} {
		c.ReadCatchUps.WithLabelValues(result)
	}
	for _, result := range []string{MetaRouted, MetaLocal, MetaDropped, MetaFailed} {
		c.MetaEvents.WithLabelValues(result)
	}
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "metis_cluster_projection_lag",
		Help: "The log's last catalog sequence minus the sequence this node's projection applied (stream sequences; NaN when the log cannot be asked)."},
		func() float64 {
			v, ok := src.ProjectionLag()
			if !ok {
				return math.NaN()
			}
			return v
		})
	dropped := func(reason string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "metis_cluster_streaming_publishes_dropped_total",
			Help:        "Streaming events this node did not get into the log, by reason: refused (sent, but the stream refused or did not acknowledge it), unsent (not sent: the node had lost the tree or could not confirm its lease).",
			ConstLabels: prometheus.Labels{"reason": reason}}, f)
	}
	r.reg.MustRegister(c.LeaseAcquired, c.LeaseLosses, c.FencedPublishes, c.Routed, c.ReadCatchUps, c.MetaEvents, c.Failovers, lag,
		dropped("refused", src.StreamingRefused), dropped("unsent", src.StreamingUnsent),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "metis_cluster_late_events_discarded_total",
			Help: "Events of deposed owners (sent after another node took their tree) this node's feeds discarded."}, src.LateEvents),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "metis_cluster_stream_gaps_total",
			Help: "Gaps this node's feeds found in trees owned elsewhere (events the owner published that never reached the log), each told to the tree's clients here."}, src.StreamGaps),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "metis_cluster_projection_applied_sequence",
			Help: "The stream sequence this node's projection applied through."}, src.ProjectionApplied),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "metis_cluster_projection_skipped_records_total",
			Help: "Undecodable log records the projection skipped."}, src.ProjectionSkipped),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "metis_cluster_feeds",
			Help: "Per-tree feeds (ordered consumers) this node runs for its clients of trees owned elsewhere."}, src.Feeds),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "metis_cluster_owned_trees",
			Help: "Delegation trees this node owns."}, src.OwnedTrees),
	)
	return c
}

// LeaseAcquiredInc counts a lease taken.
func (c *Cluster) LeaseAcquiredInc() {
	if c != nil {
		c.LeaseAcquired.Inc()
	}
}

// LeaseEnded counts a lease no longer held, by reason; a fenced one is
// also a fenced publish.
func (c *Cluster) LeaseEnded(reason string) {
	if c == nil {
		return
	}
	c.LeaseLosses.WithLabelValues(reason).Inc()
	if reason == LeaseFenced {
		c.FencedPublishes.Inc()
	}
}

// RoutedInc counts a request forwarded to a tree's owner.
func (c *Cluster) RoutedInc(kind, result string) {
	if c != nil {
		c.Routed.WithLabelValues(kind, result).Inc()
	}
}

// ReadCatchUp counts a read that waited for the projection.
func (c *Cluster) ReadCatchUp(result string) {
	if c != nil {
		c.ReadCatchUps.WithLabelValues(result).Inc()
	}
}

// MetaEvent counts a meta-event of a client of a tree owned elsewhere,
// by result.
func (c *Cluster) MetaEvent(result string) {
	if c != nil {
		c.MetaEvents.WithLabelValues(result).Inc()
	}
}

// FailoverInc counts a tree this node took over from another owner.
func (c *Cluster) FailoverInc(trigger string) {
	if c != nil {
		c.Failovers.WithLabelValues(trigger).Inc()
	}
}
