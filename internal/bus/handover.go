package bus

import (
	"context"
	"fmt"
)

// ErrMoved is wrapped by the error of an emit into a delegation tree
// that another process writes now (cluster mode: this node lost the tree
// to another node; Suspend), and by a store's error for an event it
// refused for that reason. It wraps ErrClosed: an agent loop stops as it
// does when the server closes, and leaves its turn for the tree's new
// writer to end, and the bus drops such an event without logging it as
// a fault.
var ErrMoved = fmt.Errorf("%w: the delegation tree is written elsewhere", ErrClosed)

// Suspend stops this bus from writing a session's delegation tree: in
// cluster mode the node lost the tree to another node, which writes it
// from now on. Every later emit into any session of the tree fails with
// an error wrapping ErrClosed and cause (so an agent loop stops as it
// does when the server closes, and leaves its turn for the tree's new
// owner to end), and the live sinks that can rebuild their clients are
// told to (MoveResyncer, or Resyncer): those clients reconnect with their cursor and
// follow the tree from wherever it is written now. Events relayed from
// the log (Relay) still reach the live sinks. Resume lifts it.
func (b *Bus) Suspend(ctx context.Context, sessionID string, cause error) error {
	em, err := b.Emitter(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("bus: suspend %s: %w", sessionID, err)
	}
	o := em.o
	serr := fmt.Errorf("%w: the tree of %s: %w", ErrMoved, sessionID, cause)
	// Emits check it under submitMu: one in progress has submitted by
	// the time the lock is free, and none goes out after it.
	o.submitMu.Lock()
	o.suspended.Store(&serr)
	o.submitMu.Unlock()
	b.mu.Lock()
	var members []string
	for id, e := range b.emitters {
		if e.o == o {
			members = append(members, id)
		}
	}
	b.mu.Unlock()
	o.outMu.Lock()
	defer o.outMu.Unlock()
	for _, id := range members {
		b.resyncMoved(id)
	}
	return nil
}

// Resume lets this bus write a session's delegation tree again, after
// another process wrote it (cluster mode: this node took the tree over
// from a dead or deposed owner, whose last event of either family is
// tail). The tree's id sequencer moves past tail, so every new id sorts
// after everything the previous writer emitted, and its delivery point
// (the hub's seam) moves to tail as CatchUp's does: what the log held
// up to tail is served from the store, what this bus emits follows.
// Relay the previous writer's events up to tail before calling it:
// Relay drops what is at or before the delivery point.
func (b *Bus) Resume(ctx context.Context, sessionID, tail string) error {
	em, err := b.Emitter(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("bus: resume %s: %w", sessionID, err)
	}
	o := em.o
	o.submitMu.Lock()
	defer o.submitMu.Unlock()
	if tail != "" {
		if err := o.seq.Observe(tail); err != nil {
			return fmt.Errorf("bus: resume %s after %s: %w", sessionID, tail, err)
		}
	}
	o.outMu.Lock()
	b.moveLastOut(o, tail, "")
	o.outMu.Unlock()
	o.suspended.Store(nil)
	return nil
}
