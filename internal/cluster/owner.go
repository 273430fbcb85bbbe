package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// claimAttempts bounds how often Own reads the tree's tail again after
// a claim raced with a stale writer's last publish.
const claimAttempts = 5

// Owner is this node's ownership of one tree: its lease and its fence.
// The tree's work (turns, tools, workers) runs under Context, which is
// cancelled when the lease is lost, a publish is fenced, or the owner
// releases the tree; every later publish is refused.
type Owner struct {
	lease *Lease
	fence *Fence
	ctx   context.Context
	stop  context.CancelCauseFunc
}

// Own takes tree for this node: it acquires the lease (ErrLeaseHeld if
// another node holds it) and claims the tree's write side in the log, so
// that a previous owner cannot commit anything more. Release must be
// called when the owner is done, lost or not.
func Own(ctx context.Context, log *Log, leases *Leases, tree string) (*Owner, error) {
	lease, err := leases.Acquire(ctx, tree)
	if err != nil {
		return nil, err
	}
	var fence *Fence
	for range claimAttempts {
		fence, err = log.Claim(ctx, tree, leases.Node(), lease.Revision())
		if !errors.Is(err, ErrFenced) {
			break
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("cluster: own %s: %w", tree, err), lease.Release(context.WithoutCancel(ctx)))
	}
	octx, stop := context.WithCancelCause(lease.Context())
	return &Owner{lease: lease, fence: fence, ctx: octx, stop: stop}, nil
}

// Tree returns the owned tree.
func (o *Owner) Tree() string { return o.fence.Tree() }

// Context is done when this node may no longer work on the tree;
// context.Cause tells why (ErrLeaseLost, ErrFenced, ErrLeaseReleased).
func (o *Owner) Context() context.Context { return o.ctx }

// Lease returns the owner's lease.
func (o *Owner) Lease() *Lease { return o.lease }

// LastCatalogSeq returns the sequence of the owner's last catalog write
// (its ownership marker before any event).
func (o *Owner) LastCatalogSeq() uint64 { return o.fence.Last() }

// PublishCatalog appends a catalog event of the tree with its group's
// store ops, fenced, and returns once the stream acknowledged it. An
// owner that lost the tree publishes nothing and returns the cause; a
// fenced publish stops the owner (Context is cancelled with the
// *FencedError as its cause) and gives up the lease.
func (o *Owner) PublishCatalog(ctx context.Context, ev *event.Event, ops []store.Op) (Published, error) {
	if err := context.Cause(o.ctx); err != nil {
		return Published{}, fmt.Errorf("cluster: publish %s: tree %s no longer owned: %w", ev.ID, o.Tree(), err)
	}
	p, err := o.fence.PublishCatalog(ctx, ev, ops)
	if errors.Is(err, ErrFenced) {
		o.stop(err)
		o.lease.Lose(err)
	}
	return p, err
}

// PublishStreamingAsync sends a streaming event of the tree without
// waiting for its acknowledgement (Log.PublishStreamingAsync), unless
// the owner lost the tree.
func (o *Owner) PublishStreamingAsync(ev *event.Event) error {
	if err := context.Cause(o.ctx); err != nil {
		return fmt.Errorf("cluster: publish %s: tree %s no longer owned: %w", ev.ID, o.Tree(), err)
	}
	return o.fence.PublishStreamingAsync(ev)
}

// Epoch returns the owner's ownership epoch (epoch.go).
func (o *Owner) Epoch() uint64 { return o.fence.Epoch() }

// Follow tells the owner the newest event of the tree before its own
// (the tail it read when it took the tree): its first publish names it
// as its previous event (epoch.go).
func (o *Owner) Follow(id string) { o.fence.Follow(id) }

// confirmRetry spaces Confirm's renewals while the lease can be
// neither confirmed nor found lost (the bucket is unreachable).
const confirmRetry = 100 * time.Millisecond

// Confirm returns once this node may still act as the tree's owner
// where nobody can check it, delivering the tree's events to its own
// clients: its lease was confirmed (a renewal the bucket stored) less
// than half the lease's TTL ago, or is renewed now. A node whose lease
// is older than that was paused (its clock jumped past its renewals)
// or cut off from the bucket, and another node may have taken the
// tree meanwhile without this one knowing: it holds on until a renewal
// confirms the lease, and fails (ErrLeaseLost) once it is lost, at
// most a TTL after the last confirmed renewal. Half the TTL is also
// the clock difference between nodes this tolerates: an event this
// node delivers has an id older than any a successor can give.
func (o *Owner) Confirm(ctx context.Context) error {
	for {
		if err := context.Cause(o.ctx); err != nil {
			return fmt.Errorf("cluster: tree %s no longer owned: %w", o.Tree(), err)
		}
		if o.lease.Fresh() {
			return nil
		}
		rctx, cancel := context.WithTimeout(ctx, o.lease.ls.cfg.Renew)
		err := o.lease.Renew(rctx)
		cancel()
		switch {
		case err == nil:
			continue
		case errors.Is(err, ErrLeaseLost):
			return err
		}
		select {
		case <-time.After(confirmRetry):
		case <-ctx.Done():
			return fmt.Errorf("cluster: confirm the lease of %s: %w", o.Tree(), context.Cause(ctx))
		}
	}
}

// Release ends the ownership: Context is cancelled and the lease
// deleted (if still held), so another node can take the tree at once.
func (o *Owner) Release(ctx context.Context) error {
	o.stop(ErrLeaseReleased)
	return o.lease.Release(ctx)
}
