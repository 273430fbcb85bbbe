package cluster

import (
	"context"
	"fmt"
)

// notify wakes the waiters of WaitDelivered.
func (fd *feed) notify() {
	fd.movedMu.Lock()
	close(fd.moved)
	fd.moved = make(chan struct{})
	fd.movedMu.Unlock()
}

// WaitDelivered waits until the feed of tree has handled every message
// of the stream through sequence seq (handed its events to the sink),
// so a node taking the tree over relays everything the previous owner
// wrote before it emits. It returns at once if the node runs no feed of
// the tree (it has no client that could miss anything), and fails if
// ctx is done or the feed stops first.
func (f *Feeds) WaitDelivered(ctx context.Context, tree string, seq uint64) error {
	f.mu.Lock()
	fd := f.trees[tree]
	f.mu.Unlock()
	if fd == nil {
		return nil
	}
	for {
		fd.movedMu.Lock()
		moved := fd.moved
		fd.movedMu.Unlock()
		if fd.delivered.Load() >= seq {
			return nil
		}
		select {
		case <-moved:
		case <-fd.done:
			return nil // the tree's last client left: nobody to hand anything to
		case <-ctx.Done():
			return fmt.Errorf("cluster: feed of %s: wait for seq %d (delivered %d): %w", tree, seq, fd.delivered.Load(), context.Cause(ctx))
		}
	}
}
