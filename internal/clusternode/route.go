package clusternode

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/metis-agent/metis/internal/cluster"
)

// Routed requests (docs/scale-out.md, "Routing to the owner"): this
// node's requests about trees owned elsewhere, and its answers to the
// requests of other nodes about the trees it owns.
//
// The tree's lease decides who answers, not a timeout: a request waits
// for the node that holds the lease, and stops waiting as soon as the
// lease changes hands or expires (the lease watch says so), so a paused
// or cut-off owner fails over as fast as a dead one. A request to a
// tree whose lease is free fails at once with cluster.ErrNoOwner (the
// caller takes the tree); one the holder does not answer in time fails
// with cluster.ErrNoAnswer (503 owner_unavailable: retry).

// handlers is the owner's table of answers to routed requests. Adding
// a kind of routed request is one more Handle here (with its Kind in
// internal/cluster and, for an HTTP request, its route in
// internal/api's cluster front).
func (cn *Node) handlers() cluster.Handlers {
	hs := cluster.Handlers{}
	cluster.Handle(hs, cluster.KindSubmit, cn.Submit)
	cluster.Handle(hs, cluster.KindCancel, cn.Cancel)
	cluster.Handle(hs, cluster.KindFeedback, cn.Feedback)
	cluster.Handle(hs, cluster.KindMeta, cn.Meta)
	cluster.Handle(hs, cluster.KindApprove, cn.Approve) // handlers_session.go
	cluster.Handle(hs, cluster.KindPatch, cn.Patch)
	cluster.Handle(hs, cluster.KindCompact, cn.Compact)
	cluster.Handle(hs, cluster.KindMCP, cn.MCPServers)
	cluster.Handle(hs, cluster.KindDelete, cn.Delete)
	cluster.Handle(hs, cluster.KindTurns, cn.Turns) // handlers_checkpoint.go
	cluster.Handle(hs, cluster.KindTurnChanges, cn.TurnChanges)
	cluster.Handle(hs, cluster.KindRevert, cn.Revert)
	cluster.Handle(hs, cluster.KindRestore, cn.Restore)
	cluster.Handle(hs, cluster.KindFork, cn.Fork)
	return hs
}

// gated is handlers for a tree this node took: each request waits
// until the tree is ready (a take has ended the turns its previous
// owner left open), or answers not_owner if the node loses it first.
func (cn *Node) gated(ot *ownedTree) cluster.Handlers {
	hs := cn.handlers()
	for verb, h := range hs {
		hs[verb] = func(ctx context.Context, tree string, body []byte) (any, error) {
			select {
			case <-ot.ready:
			case <-ctx.Done():
				return nil, cluster.NotOwnerError()
			}
			return h(ctx, tree, body)
		}
	}
	return hs
}

// routeAttempts bounds how often a request is sent again after the
// tree's lease moved to another node while it waited.
const routeAttempts = 3

// errLeaseMoved cancels a request whose tree's lease changed hands (or
// expired) while it waited for the holder's answer.
var errLeaseMoved = errors.New("cluster: the tree's lease changed while the request waited")

// Forward sends a routed request (verb: a cluster.Kind's Verb) to the
// owner of tree and decodes its reply into out. It fails with
// cluster.ErrNoOwner when the tree's lease is free (nobody owns it: the
// caller may take it), cluster.ErrNoAnswer when the holder did not
// answer in time, or the owner's *cluster.RemoteError.
func (cn *Node) Forward(ctx context.Context, tree, verb string, req, out any) error {
	var err error
	for range routeAttempts {
		w := cn.watchLease(tree)
		var holder string
		var rev uint64
		holder, rev, err = cn.leases.Holder(ctx, tree)
		if err == nil && (holder == "" || holder == cn.name) {
			// Free, or this node is taking it (or gave it up a moment
			// ago): the caller takes it, which waits until it is ready.
			w.stop()
			return fmt.Errorf("%w: %s (its lease is held by %q)", cluster.ErrNoOwner, tree, holder)
		}
		if err != nil {
			holder, rev = "", 0 // unknown: any change of the lease ends the wait
		}
		w.address(holder, rev)
		rctx, cancel := context.WithCancelCause(ctx)
		go func() {
			select {
			case <-w.moved:
				cancel(errLeaseMoved)
			case <-rctx.Done():
			}
		}()
		err = cn.router.Call(rctx, tree, verb, req, out)
		moved := errors.Is(context.Cause(rctx), errLeaseMoved)
		cancel(nil)
		w.stop()
		if err == nil || !moved || ctx.Err() != nil {
			return err
		}
		cn.logger.Debug("cluster: the tree's lease moved while a request waited; sending it again", "tree", tree, "request", verb)
	}
	return err
}

// leaseWaiter is told when a tree's lease changes hands or goes after
// the read of the lease its request was sent by.
//
// The waiter is registered before the lease is read (so no change
// after the read is missed), and the lease watch may report a change
// late: a change can reach the waiter that the read already reflects
// (the holder's own renewal, every third of the TTL, seen between the
// registration and the read; a dead owner's lease or its expiry, seen
// once its successor holds the lease and the request went there). Such
// a change is not a move: the request went to the right node, which
// may be carrying it out, and sending it again would carry it out twice
// (a submit's second copy is refused turn_in_flight by its first). The
// lease's revision tells them apart: a change at or before the revision
// read is old news.
type leaseWaiter struct {
	cn    *Node
	tree  string
	moved chan struct{}
	once  sync.Once

	// Guarded by cn.waitMu.
	addressed bool
	holder    string                // the holder the request went to ("" unknown)
	rev       uint64                // the lease's revision read (0 unknown)
	early     []cluster.LeaseChange // changes seen before the read was addressed
}

// watchLease registers a waiter for tree's next change of hands; address
// tells it where the request went.
func (cn *Node) watchLease(tree string) *leaseWaiter {
	w := &leaseWaiter{cn: cn, tree: tree, moved: make(chan struct{})}
	cn.waitMu.Lock()
	if cn.waiters == nil {
		cn.waiters = map[string]map[*leaseWaiter]struct{}{}
	}
	if cn.waiters[tree] == nil {
		cn.waiters[tree] = map[*leaseWaiter]struct{}{}
	}
	cn.waiters[tree][w] = struct{}{}
	cn.waitMu.Unlock()
	return w
}

// address records the lease read the request is sent by: its holder and
// revision ("" and 0 when unknown). The changes seen since the waiter
// was registered are judged against it.
func (w *leaseWaiter) address(holder string, rev uint64) {
	w.cn.waitMu.Lock()
	defer w.cn.waitMu.Unlock()
	w.addressed, w.holder, w.rev = true, holder, rev
	for _, c := range w.early {
		w.judge(c)
	}
	w.early = nil
}

// judge ends the wait if c moved the lease away from the node the
// request went to: a change after the revision read that leaves the
// lease free or to another node (a renewal by that node is no move).
// cn.waitMu is held.
func (w *leaseWaiter) judge(c cluster.LeaseChange) {
	if w.rev != 0 && c.Revision != 0 && c.Revision <= w.rev {
		return
	}
	if w.holder == "" || c.Holder == "" || c.Holder != w.holder {
		w.once.Do(func() { close(w.moved) })
	}
}

// stop unregisters the waiter.
func (w *leaseWaiter) stop() {
	cn := w.cn
	cn.waitMu.Lock()
	delete(cn.waiters[w.tree], w)
	if len(cn.waiters[w.tree]) == 0 {
		delete(cn.waiters, w.tree)
	}
	cn.waitMu.Unlock()
}

// leaseChanged tells the waiters of c's tree that its lease changed
// (see leaseWaiter.judge).
func (cn *Node) leaseChanged(c cluster.LeaseChange) {
	cn.waitMu.Lock()
	defer cn.waitMu.Unlock()
	for w := range cn.waiters[c.Tree] {
		if !w.addressed {
			w.early = append(w.early, c)
			continue
		}
		w.judge(c)
	}
}
