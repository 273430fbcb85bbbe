package clusternode

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/protocol"
)

// nodeStatus is what a cluster node does for operators: it announces
// itself in the node directory, feeds the cluster metrics, and answers
// GET /cluster (docs/scale-out.md, "Operating a cluster").
type nodeStatus struct {
	cn       *Node
	started  time.Time
	nodes    *cluster.Nodes
	announce *cluster.Announcement
	metrics  *metrics.Cluster

	stopOnce sync.Once
}

// lagTimeout bounds asking the log for its catalog tail at a scrape.
const lagTimeout = 2 * time.Second

// ErrNoStatus is Status's error before StartStatus.
var ErrNoStatus = errors.New("cluster: the node's status is not started")

// StartStatus opens the node directory, announces this node, and
// registers the cluster metrics on reg. The bus and feeds exist.
func (cn *Node) StartStatus(ctx context.Context, reg *metrics.Registry) error {
	st := &nodeStatus{cn: cn, started: time.Now().UTC()}
	octx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	nodes, err := cluster.OpenNodes(octx, cn.log.JetStream(), cluster.NodesConfig{Logger: cn.logger, Replicas: cn.replicas})
	if err != nil {
		return err
	}
	st.nodes = nodes
	st.metrics = reg.NewCluster(st)
	cn.router.Observe(st.metrics.RoutedInc)
	st.announce, err = nodes.Announce(octx, cluster.NodeInfo{Name: cn.name, Started: st.started, Version: buildVersion()}, cn.proj.Applied)
	if err != nil {
		return err
	}
	cn.status = st
	return nil
}

// stopStatus leaves the node directory (once).
func (cn *Node) stopStatus(ctx context.Context) error {
	st := cn.status
	if st == nil {
		return nil
	}
	var err error
	st.stopOnce.Do(func() { err = st.announce.Stop(ctx) })
	return err
}

// Listening announces the node's HTTP address.
func (cn *Node) Listening(url string) {
	if cn.status != nil {
		cn.status.announce.SetAddress(url)
	}
}

// countLease counts a lease taken and, once the owner's context ends,
// its loss by reason.
func (cn *Node) countLease(o *cluster.Owner) {
	if cn.status == nil {
		return
	}
	m := cn.status.metrics
	m.LeaseAcquiredInc()
	context.AfterFunc(o.Context(), func() { m.LeaseEnded(leaseEndReason(context.Cause(o.Context()))) })
}

// leaseEndReason names why an owner's context ended.
func leaseEndReason(cause error) string {
	switch {
	case errors.Is(cause, cluster.ErrFenced):
		return metrics.LeaseFenced
	case errors.Is(cause, cluster.ErrLeaseReleased):
		return metrics.LeaseReleased
	}
	return metrics.LeaseLost
}

// ProjectionLag implements metrics.ClusterSource.
func (st *nodeStatus) ProjectionLag() (float64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	last, err := st.cn.log.LastCatalogSeqAll(ctx)
	if err != nil {
		st.cn.logger.Debug("cluster: projection lag", "err", err)
		return 0, false
	}
	return float64(lag(last, st.cn.proj.Applied())), true
}

func lag(last, applied uint64) uint64 {
	if last > applied {
		return last - applied
	}
	return 0
}

// ProjectionApplied implements metrics.ClusterSource.
func (st *nodeStatus) ProjectionApplied() float64 { return float64(st.cn.proj.Applied()) }

// ProjectionSkipped implements metrics.ClusterSource.
func (st *nodeStatus) ProjectionSkipped() float64 { return float64(st.cn.proj.Skipped()) }

// Feeds implements metrics.ClusterSource.
func (st *nodeStatus) Feeds() float64 {
	st.cn.attachMu.Lock()
	defer st.cn.attachMu.Unlock()
	return float64(len(st.cn.attached))
}

// StreamingRefused implements metrics.ClusterSource.
func (st *nodeStatus) StreamingRefused() float64 { return float64(st.cn.log.RefusedStreaming()) }

// StreamingUnsent implements metrics.ClusterSource.
func (st *nodeStatus) StreamingUnsent() float64 { return float64(st.cn.store.Unsent()) }

// LateEvents implements metrics.ClusterSource.
func (st *nodeStatus) LateEvents() float64 { return float64(st.cn.feeds.Late()) }

// StreamGaps implements metrics.ClusterSource.
func (st *nodeStatus) StreamGaps() float64 { return float64(st.cn.feeds.Gaps()) }

// countFailover counts a tree this node took over from another owner.
func (cn *Node) countFailover(trigger string) {
	if cn.status != nil {
		cn.status.metrics.FailoverInc(trigger)
	}
}

// OwnedTrees implements metrics.ClusterSource.
func (st *nodeStatus) OwnedTrees() float64 {
	st.cn.mu.Lock()
	defer st.cn.mu.Unlock()
	n := 0
	for _, ot := range st.cn.owners {
		if ot.owner.Context().Err() == nil {
			n++
		}
	}
	return float64(n)
}

// statusTimeout bounds building GET /cluster's answer.
const statusTimeout = 10 * time.Second

// Status reads the cluster's state for GET /cluster: the log's catalog
// tail, the node directory and the leases. It fails with ErrNoStatus
// before StartStatus.
func (cn *Node) Status(ctx context.Context) (protocol.ClusterStatus, error) {
	if cn.status == nil {
		return protocol.ClusterStatus{}, ErrNoStatus
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	out := protocol.ClusterStatus{Node: cn.name, Stream: cn.log.Config().Stream, NATS: cn.nc.ConnectedClusterName()}
	if out.NATS == "" {
		out.NATS = cn.nc.ConnectedServerName()
	}
	last, err := cn.log.LastCatalogSeqAll(ctx)
	if err != nil {
		return out, err
	}
	// Applied after the tail: this node's lag is never negative.
	applied := cn.proj.Applied()
	nodes, err := cn.status.nodes.List(ctx)
	if err != nil {
		return out, err
	}
	leases, truncated, err := cn.leases.List(ctx, protocol.MaxClusterLeases)
	if err != nil {
		return out, err
	}
	out.At = time.Now().UTC()
	out.LastCatalogSeq = last
	out.LeasesTruncated = truncated
	out.Leases = make([]protocol.ClusterLease, 0, len(leases))
	owned := map[string]int{}
	for _, l := range leases {
		owned[l.Node]++
		out.Leases = append(out.Leases, protocol.ClusterLease{Tree: l.Tree, Node: l.Node, Revision: l.Revision,
			AcquiredAt: l.Acquired.UTC(), RenewedAt: l.Renewed.UTC(), AgeSeconds: max(0, out.At.Sub(l.Acquired).Seconds())})
	}
	out.Nodes = make([]protocol.ClusterNode, 0, len(nodes)+1)
	self := false
	for _, n := range nodes {
		cnode := protocol.ClusterNode{Name: n.Name, Address: n.Address, Started: n.Started.UTC(), Version: n.Version,
			Heartbeat: n.Heartbeat.UTC(), AppliedSeq: n.Applied, OwnedTrees: owned[n.Name]}
		if n.Name == cn.name {
			cnode.Self, cnode.AppliedSeq, self = true, applied, true
		}
		cnode.Lag = lag(last, cnode.AppliedSeq)
		out.Nodes = append(out.Nodes, cnode)
	}
	if !self {
		// This node's announcement expired (its heartbeats failed): it
		// still answers, so it still counts.
		out.Nodes = append(out.Nodes, protocol.ClusterNode{Name: cn.name, Started: cn.status.started, Version: buildVersion(),
			AppliedSeq: applied, Lag: lag(last, applied), OwnedTrees: owned[cn.name], Self: true})
	}
	return out, nil
}

// buildVersion is the version a node announces: the module version
// and, for a build from a checkout, its revision.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	return v
}
