package clusternode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
)

// Failover (docs/scale-out.md, "Failover"): a tree whose owner died is
// taken over by another node as soon as its lease expires, and a node
// that loses a tree stops the tree's work.
//
//   - Every node watches the lease bucket. A lease that disappears
//     (expired, or released) is offered to the node's failover loop,
//     which takes the tree if its projection shows a turn of it still
//     open, or if the node has clients of it; the lease's create lets
//     exactly one node win.
//   - Taking a tree that already has events (acquire) waits until the
//     projection applied the tree's catalog through the new owner's
//     ownership marker, reads the tree's tail in the log (its newest
//     event id, streaming events included), lets this node's feed of the
//     tree hand over everything up to it, and then moves the bus's id
//     sequencer and seam past it (bus.Resume), before anything is
//     emitted. The taker then ends every turn of the tree left open with
//     the canonical sequence (session.Manager.RecoverTree: turn.cancelled,
//     reason owner_lost, phase interrupted).
//   - Losing a tree (the owner's context ends: the lease was taken,
//     expired or could not be renewed, or a publish was fenced) stops
//     its routed requests, suspends the bus's writes into the tree (its
//     clients here reconnect and follow the tree from the log), cancels
//     its turns in flight here and offers the tree to failover again,
//     in case its lease is free and nobody else takes it.
//   - At startup the loop first looks at the trees with turns left open
//     in the projection: the node takes (and ends the turns of) only
//     those whose lease is free.

// failover is the state of a node's failover loop.
type failover struct {
	ctx    context.Context // ends when the node closes
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loop, the watcher, one goroutine per owned tree

	mu      sync.Mutex
	pending map[string]bool // trees offered, not looked at yet
	wake    chan struct{}   // one slot: there is something pending
}

func newFailover() *failover {
	ctx, cancel := context.WithCancel(context.Background())
	return &failover{ctx: ctx, cancel: cancel, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// Bounds of the failover's steps.
const (
	// takeTimeout bounds taking over one tree (the lease, the wait for
	// the projection and the feed, ending its open turns).
	takeTimeout = 30 * time.Second
	// lostTimeout bounds how long a node that lost a tree waits for its
	// cancelled turns to wind down.
	lostTimeout = 30 * time.Second
	// scanTimeout bounds the startup scan's wait for the projection to
	// catch up with the log.
	scanTimeout = 2 * time.Minute
)

// Recover starts watching the lease bucket and the failover loop,
// whose first step is the startup scan of the trees with open turns:
// crash recovery in cluster mode, where an open turn may belong to a
// tree another node runs (the node ends only the turns of the trees it
// takes over).
func (cn *Node) Recover(ctx context.Context) error {
	w, err := cn.leases.Watch(cn.fo.ctx)
	if err != nil {
		return err
	}
	cn.fo.wg.Add(3)
	go cn.watchLeases(w)
	go cn.failoverLoop()
	go cn.idleLoop()
	return nil
}

// StopFailover stops the watcher and the loop (the node takes no tree
// over from then on); Close waits for them.
func (cn *Node) StopFailover() { cn.fo.cancel() }

// watchLeases offers every tree whose lease disappears to the loop.
func (cn *Node) watchLeases(w *cluster.LeaseWatcher) {
	defer cn.fo.wg.Done()
	defer func() {
		if err := w.Stop(); err != nil && cn.fo.ctx.Err() == nil {
			cn.logger.Warn("cluster: lease watch", "err", err)
		}
	}()
	for {
		c, err := w.Next(cn.fo.ctx)
		if err != nil {
			if cn.fo.ctx.Err() == nil {
				cn.logger.Error("cluster: lease watch stopped; dead owners' trees are taken over only on request until this node restarts", "err", err)
			}
			return
		}
		cn.leaseChanged(c)
		if c.Holder == "" {
			cn.logger.Debug("cluster: lease gone", "tree", c.Tree, "node", cn.name)
			cn.offer(c.Tree)
		}
	}
}

// offer queues a tree for the failover loop to look at.
func (cn *Node) offer(tree string) {
	cn.fo.mu.Lock()
	cn.fo.pending[tree] = true
	cn.fo.mu.Unlock()
	select {
	case cn.fo.wake <- struct{}{}:
	default:
	}
}

// failoverLoop runs the startup scan, then looks at each offered tree.
func (cn *Node) failoverLoop() {
	defer cn.fo.wg.Done()
	cn.scanOpenTrees()
	for {
		select {
		case <-cn.fo.ctx.Done():
			return
		case <-cn.fo.wake:
		}
		cn.fo.mu.Lock()
		trees := cn.fo.pending
		cn.fo.pending = map[string]bool{}
		cn.fo.mu.Unlock()
		for tree := range trees {
			if cn.fo.ctx.Err() != nil {
				return
			}
			cn.consider(tree)
		}
	}
}

// scanOpenTrees offers the trees that have turns left open in the
// projection, once it caught up with the log: crash recovery in cluster
// mode (the node takes, and ends the turns of, only the trees whose
// leases are free).
func (cn *Node) scanOpenTrees() {
	ctx, cancel := context.WithTimeout(cn.fo.ctx, scanTimeout)
	defer cancel()
	last, err := cn.log.LastSeq(ctx)
	if err == nil {
		err = cn.proj.WaitApplied(ctx, last)
	}
	var trees []string
	if err == nil {
		trees, err = cn.sessions.OpenTrees(ctx)
	}
	if err != nil {
		if cn.fo.ctx.Err() == nil {
			cn.logger.Error("cluster: startup scan for open turns", "err", err)
		}
		return
	}
	for _, tree := range trees {
		cn.offer(tree)
	}
}

// consider takes a tree whose lease is free if the node has a reason
// to: a turn of it left open, a background command of it that the
// projection shows running, or clients of it here.
func (cn *Node) consider(tree string) {
	if cn.owns(tree) {
		return
	}
	ctx, cancel := context.WithTimeout(cn.fo.ctx, takeTimeout)
	defer cancel()
	holder, _, err := cn.leases.Holder(ctx, tree)
	if err != nil || holder != "" {
		return
	}
	// The projection must show the tree's last catalog event before its
	// open turns are counted.
	seq, err := cn.log.LastCatalogSeq(ctx, tree)
	if err == nil {
		err = cn.proj.WaitApplied(ctx, seq)
	}
	if err != nil {
		cn.logger.Warn("cluster: failover: read the tree", "tree", tree, "err", err)
		return
	}
	if !cn.hasClients(tree) {
		trees, err := cn.sessions.OpenTrees(ctx)
		if err != nil {
			cn.logger.Warn("cluster: failover: open turns", "tree", tree, "err", err)
			return
		}
		open := false
		for _, t := range trees {
			open = open || t == tree
		}
		if !open {
			// Background commands its previous owner ran need their ends
			// reported too (session.Manager.RecoverTree).
			if open, err = cn.sessions.HasOpenBackground(ctx, tree); err != nil {
				cn.logger.Warn("cluster: failover: open background commands", "tree", tree, "err", err)
				return
			}
		}
		if !open {
			return
		}
	}
	start := time.Now()
	if _, err := cn.take(ctx, tree, metrics.FailoverLeaseExpired); err != nil {
		if errors.Is(err, cluster.ErrLeaseHeld) || errors.Is(err, cluster.ErrFenced) {
			// Lost the race: another node took the lease (or wrote its
			// marker) first.
			cn.logger.Debug("cluster: failover: another node took the tree first", "tree", tree, "node", cn.name)
			return
		}
		cn.logger.Warn("cluster: failover: could not take the tree", "tree", tree, "node", cn.name, "err", err)
		return
	}
	cn.logger.Info("cluster: took over tree", "tree", tree, "node", cn.name, "took", time.Since(start))
}

// hasClients reports whether this node follows tree for clients.
func (cn *Node) hasClients(tree string) bool {
	cn.attachMu.Lock()
	defer cn.attachMu.Unlock()
	return cn.attached[tree] != nil
}

// Take takes a tree nobody answers for (a routed request found no
// owner) as failover does (see take), and returns once it answers the
// tree's requests. If this node owns the tree already, or is taking it,
// it waits until it does.
func (cn *Node) Take(ctx context.Context, tree string) error {
	_, err := cn.take(ctx, tree, metrics.FailoverRequest)
	if err != nil {
		return err
	}
	cn.mu.Lock()
	ot := cn.owners[tree]
	cn.mu.Unlock()
	if ot == nil {
		return fmt.Errorf("%w: tree %s: lost again at once", cluster.ErrLeaseLost, tree)
	}
	select {
	case <-ot.ready:
		return nil
	case <-ot.owner.Context().Done():
		return fmt.Errorf("cluster: take %s: %w", tree, context.Cause(ot.owner.Context()))
	case <-ctx.Done():
		return fmt.Errorf("cluster: take %s: %w", tree, context.Cause(ctx))
	}
}

// take is a deliberate take of a tree (a routed request nobody
// answered, a failover): it acquires the tree as ownerOf does and, if
// this call took it, ends every turn of the tree left open by its
// previous owner before it answers the tree's routed requests (a turn
// submitted from another node cannot start before they ended: the
// requests that come meanwhile wait).
func (cn *Node) take(ctx context.Context, tree, trigger string) (*cluster.Owner, error) {
	ot, took, err := cn.acquireServing(ctx, tree, false)
	if err != nil || !took {
		if ot == nil {
			return nil, err
		}
		return ot.owner, err
	}
	defer close(ot.ready)
	cn.countFailover(trigger)
	ended, rerr := cn.sessions.RecoverTree(ctx, tree)
	if len(ended) > 0 {
		cn.logger.Warn("cluster: ended the turns the tree's previous owner left open", "tree", tree, "node", cn.name, "turns", ended)
	}
	if rerr != nil {
		return ot.owner, fmt.Errorf("cluster: take %s: %w", tree, rerr)
	}
	return ot.owner, nil
}

// stopServing stops answering a tree's routed requests.
func (cn *Node) stopServing(ot *ownedTree) {
	cn.mu.Lock()
	sv := ot.serving
	cn.mu.Unlock()
	if sv != nil {
		sv.Stop()
	}
}

// storeOwner is the cluster store's OwnerFunc: the owner a tree's
// events are published by. A tree this node lost is not taken again
// implicitly (the events of its cancelled turns must not reach the log):
// only a deliberate take (take) does that.
func (cn *Node) storeOwner(ctx context.Context, tree string) (*cluster.Owner, error) {
	if ot := cn.liveTree(tree); ot != nil {
		ot.used()
		return ot.owner, nil
	}
	cn.mu.Lock()
	_, ending := cn.owners[tree]
	lost := cn.lost[tree]
	cn.mu.Unlock()
	if ending || lost {
		return nil, fmt.Errorf("%w: tree %s: this node lost it", cluster.ErrLeaseLost, tree)
	}
	return cn.ownerOf(ctx, tree)
}

// acquire returns this node's owner of tree, taking the tree if the node
// does not own it, and answering its routed requests; took tells
// whether this call took it.
func (cn *Node) acquire(ctx context.Context, tree string) (_ *cluster.Owner, took bool, _ error) {
	ot, took, err := cn.acquireServing(ctx, tree, true)
	if ot == nil {
		return nil, took, err
	}
	return ot.owner, took, err
}

// acquireServing is acquire. The tree's routed requests reach this node
// from the moment it holds the lease (so none goes to a previous owner
// that no longer answers); they are answered once the tree is ready:
// at once if ready, else when the caller closes the tree's ready.
func (cn *Node) acquireServing(ctx context.Context, tree string, ready bool) (_ *ownedTree, took bool, _ error) {
	if ot := cn.liveTree(tree); ot != nil {
		return ot, false, nil
	}
	cn.takeMu.Lock()
	defer cn.takeMu.Unlock()
	if ot := cn.liveTree(tree); ot != nil {
		return ot, false, nil
	}
	if err := cn.settleLoss(ctx, tree); err != nil {
		return nil, false, err
	}
	o, err := cluster.Own(ctx, cn.log, cn.leases, tree)
	if err != nil {
		return nil, false, err
	}
	ot := &ownedTree{owner: o, handled: make(chan struct{}), ready: make(chan struct{})}
	ot.used()
	if ot.serving, err = cn.router.Serve(o.Context(), tree, cn.gated(ot)); err != nil {
		return nil, false, errors.Join(err, o.Release(context.WithoutCancel(ctx)))
	}
	if err := cn.handOver(ctx, o); err != nil {
		ot.serving.Stop()
		return nil, false, errors.Join(err, o.Release(context.WithoutCancel(ctx)))
	}
	if ready {
		close(ot.ready)
	}
	cn.mu.Lock()
	cn.owners[tree] = ot
	cn.mu.Unlock()
	cn.countLease(o)
	cn.fo.wg.Add(1)
	go func() {
		defer cn.fo.wg.Done()
		<-o.Context().Done()
		cn.onLost(tree, ot)
	}()
	cn.logger.Info("cluster: took tree", "tree", tree, "node", cn.name)
	return ot, true, nil
}

// settleLoss waits until the end of this node's previous ownership of
// tree, if any, was handled (onLost), and forgets that the node lost
// it: the caller takes it deliberately.
func (cn *Node) settleLoss(ctx context.Context, tree string) error {
	cn.mu.Lock()
	prev := cn.owners[tree]
	cn.mu.Unlock()
	if prev != nil {
		select {
		case <-prev.handled:
		case <-ctx.Done():
			return fmt.Errorf("cluster: take %s: the end of the previous ownership is still handled: %w", tree, context.Cause(ctx))
		}
	}
	cn.mu.Lock()
	if cn.owners[tree] == prev {
		delete(cn.owners, tree)
	}
	delete(cn.lost, tree)
	cn.mu.Unlock()
	return nil
}

// handOver prepares the bus to write a tree this node just took, before
// anything is emitted into it: once the projection shows every catalog
// event the tree had (it applied the log through the new ownership
// marker), the tree's tail is read from the log, this node's feed of
// the tree (if it runs one) hands over everything up to it, and the
// bus's id sequencer and seam move past it. A tree the log has no
// event of yet (its session.created is being published) needs none of
// it.
func (cn *Node) handOver(ctx context.Context, o *cluster.Owner) error {
	tree := o.Tree()
	if err := cn.proj.WaitApplied(ctx, o.LastCatalogSeq()); err != nil {
		return fmt.Errorf("cluster: take %s: %w", tree, err)
	}
	if _, err := cn.store.Session(ctx, tree); errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("cluster: take %s: %w", tree, err)
	}
	tail, err := cn.log.TreeTail(ctx, tree)
	if err != nil {
		return err
	}
	o.Follow(tail.ID) // the first event this node publishes names it as its previous
	if cn.feeds != nil {
		if err := cn.feeds.WaitDelivered(ctx, tree, tail.Seq); err != nil {
			return err
		}
	}
	return cn.bus.Resume(ctx, tree, tail.ID)
}

// onLost handles the end of an ownership. A release (shutdown) needs
// nothing. A loss (the lease was taken, expired or not renewed in time,
// or a publish was fenced) stops the tree's work here: its routed
// requests are no longer answered, the bus refuses its emits (its
// clients here reconnect and follow the tree from the log), its turns
// in flight here are cancelled (none of their later events can commit:
// the tree's new owner ends them in the log), and the tree is offered
// to failover, in case its lease is free and nobody takes it.
func (cn *Node) onLost(tree string, ot *ownedTree) {
	defer close(ot.handled)
	cause := context.Cause(ot.owner.Context())
	if errors.Is(cause, cluster.ErrLeaseReleased) {
		return
	}
	cn.stopServing(ot)
	cn.mu.Lock()
	if cn.owners[tree] == ot {
		delete(cn.owners, tree)
	}
	cn.lost[tree] = true
	cn.mu.Unlock()
	cn.logger.Warn("cluster: lost tree; its work here stops", "tree", tree, "node", cn.name, "cause", cause)
	ctx, cancel := context.WithTimeout(cn.fo.ctx, lostTimeout)
	defer cancel()
	if err := cn.bus.Suspend(ctx, tree, cause); err != nil {
		cn.logger.Error("cluster: lost tree: suspend its emits", "tree", tree, "err", err)
	}
	cancelled, err := cn.sessions.CancelTree(ctx, tree, session.ReasonOwnerLost)
	if err != nil {
		cn.logger.Error("cluster: lost tree: cancel its turns", "tree", tree, "err", err)
	}
	if len(cancelled) > 0 {
		cn.logger.Warn("cluster: lost tree: cancelled its turns here", "tree", tree, "node", cn.name, "turns", cancelled)
	}
	if err := cn.sessions.WaitTree(ctx, tree); err != nil && cn.fo.ctx.Err() == nil {
		cn.logger.Error("cluster: lost tree: its turns did not wind down", "tree", tree, "err", err)
	}
	if cn.fo.ctx.Err() == nil {
		cn.offer(tree)
	}
}
