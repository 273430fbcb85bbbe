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
// that restarts resumes exactly after what it applied.
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
	err = p.log.Follow(ctx, AllCatalog, ReadFrom(cur+1), func(e Entry) error {
		return p.apply(ctx, e)
	})
	if ctx.Err() != nil {
		// Stopped, maybe in the middle of an apply: the cursor committed
		// with each group keeps a restart exact.
		return nil
	}
	return err
}

// apply writes one entry and waits for its commit.
func (p *Projection) apply(ctx context.Context, e Entry) error {
	mark := store.SetCursor{Name: p.cursor, Seq: int64(e.Seq)}
	var ops []store.Op
	switch {
	case e.Err != nil:
		p.skipped.Add(1)
		p.logger.Error("cluster: projection skips a bad record", "seq", e.Seq, "err", e.Err)
		ops = []store.Op{mark}
	case e.Marker:
		ops = []store.Op{mark}
	default:
		ops = append(append(make([]store.Op, 0, len(e.Ops)+2), e.Ops...), store.AppendEvent{Event: e.Event}, mark)
	}
	err := p.submit(ctx, ops)
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
