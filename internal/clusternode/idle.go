package clusternode

import (
	"context"
	"fmt"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
)

// Idle trees give their leases up (docs/scale-out.md, "Idle trees"). An
// owner renews each of its trees' leases every third of the TTL: one
// replicated write to the lease bucket per tree, seen by every node's
// lease watch, whether the tree is busy or has been quiet for a week.
// A tree this node owns that has no turn open, no client on this node
// and published nothing for idleAfter TTLs is released: its routed
// requests stop, the bus refuses emits into it (nothing can be emitted
// before a deliberate take has moved the ids past the tree's tail), and
// the lease is deleted. The next request for the tree, from any node,
// finds no owner and takes it (a take of a quiet tree costs a lease
// create, a marker and a read of the tree's tail: milliseconds).

// idleAfter is how many lease TTLs a tree must be quiet to be released
// (60 s with the default 10 s TTL).
const idleAfter = 6

// idleLoop releases this node's idle trees until the node closes.
func (cn *Node) idleLoop() {
	defer cn.fo.wg.Done()
	idle := idleAfter * cn.leases.TTL()
	t := time.NewTicker(idle / 2)
	defer t.Stop()
	for {
		select {
		case <-cn.fo.ctx.Done():
			return
		case <-t.C:
		}
		cn.releaseIdle(idle)
	}
}

// releaseIdle releases the trees this node owns that are idle for at
// least idle: no event published for it, no turn open, no client here.
func (cn *Node) releaseIdle(idle time.Duration) {
	cutoff := time.Now().Add(-idle).UnixNano()
	var quiet []string
	cn.mu.Lock()
	for tree, ot := range cn.owners {
		if ot.owner.Context().Err() == nil && ot.lastUsed.Load() < cutoff {
			quiet = append(quiet, tree)
		}
	}
	cn.mu.Unlock()
	if len(quiet) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(cn.fo.ctx, takeTimeout)
	defer cancel()
	open, err := cn.sessions.OpenTrees(ctx)
	if err != nil {
		cn.logger.Warn("cluster: idle trees: open turns", "err", err)
		return
	}
	busy := map[string]bool{}
	for _, t := range open {
		busy[t] = true
	}
	if cn.attachedSessions != nil {
		for _, sid := range cn.attachedSessions() {
			if t, err := cn.treeOf(ctx, sid); err == nil {
				busy[t] = true
			}
		}
	}
	for _, tree := range quiet {
		if busy[tree] || cn.fo.ctx.Err() != nil {
			continue
		}
		if err := cn.releaseTree(ctx, tree, cutoff); err != nil {
			cn.logger.Warn("cluster: release an idle tree", "tree", tree, "err", err)
		}
	}
}

// releaseTree gives up an idle tree this node owns, unless it was used
// since cutoff.
func (cn *Node) releaseTree(ctx context.Context, tree string, cutoff int64) error {
	cn.takeMu.Lock()
	defer cn.takeMu.Unlock()
	cn.mu.Lock()
	ot := cn.owners[tree]
	if ot == nil || ot.owner.Context().Err() != nil || ot.lastUsed.Load() >= cutoff {
		cn.mu.Unlock()
		return nil
	}
	// From here on the node may no longer write the tree, and may take
	// it again only deliberately (take: the ids move past its tail).
	delete(cn.owners, tree)
	cn.lost[tree] = true
	cn.mu.Unlock()
	if err := cn.bus.Suspend(ctx, tree, cluster.ErrLeaseReleased); err != nil {
		return fmt.Errorf("suspend: %w", err)
	}
	cn.stopServing(ot)
	if err := ot.owner.Release(ctx); err != nil {
		return err
	}
	cn.logger.Info("cluster: released the lease of an idle tree", "tree", tree, "node", cn.name)
	return nil
}

// used records a publish into a tree this node owns.
func (ot *ownedTree) used() { ot.lastUsed.Store(time.Now().UnixNano()) }
