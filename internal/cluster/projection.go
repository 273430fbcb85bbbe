package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/metis-agent/metis/internal/store"
)

// ProjectionStore is what a projection writes: a node's trace store.
type ProjectionStore interface {
	Submit(ops []store.Op, done func(error))
	Cursor(ctx context.Context, name string) (int64, error)
}

// DefaultProjectionCursor names the store cursor that records how far a
// node's store has applied the log.
const DefaultProjectionCursor = "cluster.projection"

// Projection keeps a node's SQLite store a projection of the log: it
// follows the catalog family of every tree in stream order and applies
// each event with the store ops of its group, in one transaction with
// the store cursor that records the event's stream sequence, so a node
// that restarts resumes exactly after what it applied. Events that
// arrive while a transaction commits share the next one (a backlog is
// applied up to projectionBatch events a transaction).
type Projection struct {
	log    *Log
	st     ProjectionStore
	cursor string
	logger *slog.Logger

	mu      sync.Mutex
	applied uint64
	moved   chan struct{} // closed and replaced when applied moves or the projection stops
	stopped error         // why Run returned; nil while it runs or before

	skipped atomic.Uint64
	lost    atomic.Uint64 // images the projection could not get (images.go)
}

// NewProjection returns a projection of log into st; cursor names the
// store cursor (DefaultProjectionCursor if "").
func NewProjection(log *Log, st ProjectionStore, cursor string, logger *slog.Logger) *Projection {
	if cursor == "" {
		cursor = DefaultProjectionCursor
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Projection{log: log, st: st, cursor: cursor, logger: logger, moved: make(chan struct{})}
}

// ErrProjectionStopped is wrapped by WaitApplied once Run has returned.
var ErrProjectionStopped = errors.New("cluster: projection stopped")

// Run applies the log to the store until ctx is done (it then returns
// nil) or the store fails a write (the error is returned: the node must
// not serve reads from a store that lost an event; a restart resumes from
// the cursor). Call it once.
//
// The consumer's messages are handed to an applier goroutine, which
// commits everything that arrived while it was busy (up to
// projectionBatch entries) as one group, one transaction: a live node
// applies each event as it comes, a node catching up on a backlog (a
// restart, an empty store, a burst of commits from many trees) applies
// it in a few large transactions instead of one per event.
func (p *Projection) Run(ctx context.Context) (err error) {
	defer func() {
		p.mu.Lock()
		p.stopped = err
		if p.stopped == nil {
			p.stopped = context.Cause(ctx)
		}
		close(p.moved)
		p.mu.Unlock()
	}()
	cur, err := p.st.Cursor(ctx, p.cursor)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cluster: projection: %w", err)
	}
	p.advance(uint64(cur))
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	entries := make(chan Entry, projectionBatch)
	applied := make(chan error, 1)
	go func() { applied <- p.applyLoop(fctx, cancel, entries) }()
	err = p.log.Follow(fctx, AllCatalog, ReadFrom(cur+1), func(e Entry) error {
		select {
		case entries <- e:
			return nil
		case <-fctx.Done():
			return context.Cause(fctx)
		}
	})
	close(entries)
	aerr := <-applied
	if ctx.Err() != nil {
		// Stopped, maybe in the middle of an apply: the cursor committed
		// with each group keeps a restart exact.
		return nil
	}
	if aerr != nil {
		return aerr
	}
	return err
}

// projectionBatch bounds the entries the projection commits in one
// group.
const projectionBatch = 256

// applyLoop applies the entries in order, each batch of those waiting
// as one group, until entries is closed or an apply fails (it then
// cancels the follow with the error and returns it).
func (p *Projection) applyLoop(ctx context.Context, cancel context.CancelCauseFunc, entries <-chan Entry) error {
	batch := make([]Entry, 0, projectionBatch)
	for e := range entries {
		batch = append(batch[:0], e)
	fill:
		for len(batch) < projectionBatch {
			select {
			case e, ok := <-entries:
				if !ok {
					break fill
				}
				batch = append(batch, e)
			default:
				break fill
			}
		}
		if err := p.getImages(ctx, batch); err != nil {
			cancel(err)
			return err
		}
		if err := p.applyBatch(ctx, batch); err != nil {
			cancel(err)
			return err
		}
		clear(batch)
	}
	return nil
}

// applyBatch commits entries as one group: their events with their
// ops, and the cursor at the last one. If the group fails (an event
// already stored, a bad write), nothing of it was stored, and each
// entry is applied on its own, as a single entry always is.
func (p *Projection) applyBatch(ctx context.Context, batch []Entry) error {
	if len(batch) == 1 {
		return p.apply(ctx, batch[0])
	}
	n := 1
	for _, e := range batch {
		n += len(e.Ops) + 1
	}
	ops := make([]store.Op, 0, n)
	for _, e := range batch {
		ops = append(ops, entryOps(e)...)
	}
	last := batch[len(batch)-1].Seq
	ops = append(ops, store.SetCursor{Name: p.cursor, Seq: int64(last)})
	if err := p.submit(ctx, ops); err != nil {
		if ctx.Err() != nil {
			return err
		}
		for _, e := range batch {
			if err := p.apply(ctx, e); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range batch {
		if e.Err != nil {
			p.skip(e)
		}
	}
	p.advance(last)
	return nil
}

// entryOps are the store writes of one entry: its event with the ops of
// its group, the removal of a deleted session's tree, or nothing (a
// marker, a bad record).
func entryOps(e Entry) []store.Op {
	switch {
	case e.Err != nil, e.Marker:
		return nil
	case e.Deleted != "":
		return []store.Op{store.RemoveTree{SessionID: e.Deleted}}
	}
	return append(append(make([]store.Op, 0, len(e.Ops)+2), e.Ops...), store.AppendEvent{Event: e.Event})
}

// skip counts and logs a record the projection could not decode.
func (p *Projection) skip(e Entry) {
	p.skipped.Add(1)
	p.logger.Error("cluster: projection skips a bad record", "seq", e.Seq, "err", e.Err)
}

// apply writes one entry and waits for its commit.
func (p *Projection) apply(ctx context.Context, e Entry) error {
	mark := store.SetCursor{Name: p.cursor, Seq: int64(e.Seq)}
	if e.Err != nil {
		p.skip(e)
	}
	err := p.submit(ctx, append(entryOps(e), mark))
	if errors.Is(err, store.ErrDuplicate) {
		// The event (and so its whole group) is in the store already:
		// only the cursor moves.
		p.logger.Warn("cluster: projection: event already stored", "seq", e.Seq, "event", e.Event.ID)
		err = p.submit(ctx, []store.Op{mark})
	}
	if err != nil {
		return fmt.Errorf("cluster: projection: apply seq %d: %w", e.Seq, err)
	}
	p.advance(e.Seq)
	return nil
}

func (p *Projection) submit(ctx context.Context, ops []store.Op) error {
	ch := make(chan error, 1)
	p.st.Submit(ops, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		// The group may still commit; the cursor committed with it keeps
		// a restart exact either way.
		return context.Cause(ctx)
	}
}

func (p *Projection) advance(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq <= p.applied {
		return
	}
	p.applied = seq
	close(p.moved)
	p.moved = make(chan struct{})
}

// Applied returns the stream sequence the store has applied through.
func (p *Projection) Applied() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// LostImages returns how many images the projection applied without
// their bytes, which it could not get from the image bucket.
func (p *Projection) LostImages() uint64 { return p.lost.Load() }

// Skipped returns how many undecodable records the projection skipped.
func (p *Projection) Skipped() uint64 { return p.skipped.Load() }

// WaitApplied waits until the store has applied the log through stream
// sequence seq, so a read shows at least the state of every event up to
// it: a node serving a client that was sent the event at seq waits for
// it before reading a snapshot. It fails when ctx is done or the
// projection stopped first.
func (p *Projection) WaitApplied(ctx context.Context, seq uint64) error {
	for {
		p.mu.Lock()
		applied, moved, stopped := p.applied, p.moved, p.stopped
		p.mu.Unlock()
		if applied >= seq {
			return nil
		}
		if stopped != nil {
			return fmt.Errorf("%w: applied through %d, waiting for %d: %w", ErrProjectionStopped, applied, seq, stopped)
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return fmt.Errorf("cluster: wait for seq %d (applied %d): %w", seq, applied, context.Cause(ctx))
		}
	}
}
