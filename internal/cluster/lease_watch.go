package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LeaseChange is one change of a tree's lease, as a watcher sees it.
type LeaseChange struct {
	Tree string
	// Holder is the node that holds the lease now; "" when the lease is
	// gone: released, or expired because its owner stopped renewing it
	// (the bucket keeps a marker for the expiry, LimitMarkerTTL, so a
	// watcher sees it).
	Holder   string
	Revision uint64
}

// LeaseWatcher follows the lease bucket: every node watches it, so the
// trees of a dead owner are taken over as soon as their leases expire,
// without waiting for a client's request.
type LeaseWatcher struct {
	w jetstream.KeyWatcher
}

// ErrWatchStopped is returned by Next once the watch ended on the
// server's side (the bucket was deleted, the connection closed).
var ErrWatchStopped = errors.New("cluster: lease watch stopped")

// Watch starts following the lease changes made from now on. The last
// change of each tree made after Watch returns is seen by Next, but not
// necessarily every change before it: the bucket keeps one value per
// tree, so a change the next one replaced before the server delivered
// it is skipped (a lease taken and given up at once may show only as
// gone). The current leases are not seen (read them with Holder). ctx is the watch's lifetime (the
// subscription follows it), not a timeout of the call. Stop must be
// called when done.
func (ls *Leases) Watch(ctx context.Context) (*LeaseWatcher, error) {
	w, err := ls.kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("cluster: watch leases: %w", err)
	}
	return &LeaseWatcher{w: w}, nil
}

// Next returns the next lease change. It fails when ctx is done or the
// watch stopped (ErrWatchStopped).
func (lw *LeaseWatcher) Next(ctx context.Context) (LeaseChange, error) {
	for {
		select {
		case <-ctx.Done():
			return LeaseChange{}, context.Cause(ctx)
		case e, ok := <-lw.w.Updates():
			if !ok {
				return LeaseChange{}, ErrWatchStopped
			}
			if e == nil { // the end of the initial values: none with UpdatesOnly
				continue
			}
			c := LeaseChange{Tree: e.Key(), Revision: e.Revision()}
			if e.Operation() == jetstream.KeyValuePut {
				var v leaseValue
				if err := json.Unmarshal(e.Value(), &v); err != nil || v.Node == "" {
					// Held by something that is not a metis node's lease:
					// held all the same.
					v.Node = "?"
				}
				c.Holder = v.Node
			}
			return c, nil
		}
	}
}

// Stop ends the watch. It may be called after the context the watch
// was started with ended, which ends the watch too: a watch already
// gone is not an error.
func (lw *LeaseWatcher) Stop() error {
	if err := lw.w.Stop(); err != nil && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("cluster: stop lease watch: %w", err)
	}
	return nil
}
