package store

import (
	"context"
	"fmt"
	"time"
)

// defaultPruneChunk is how many events one Prune transaction deletes at
// most, so the writer is never held long and other writes interleave.
const defaultPruneChunk = 2000

// sqlPruneEvents deletes the oldest chunk of events older than a time.
const sqlPruneEvents = `DELETE FROM events WHERE seq IN
(SELECT seq FROM events WHERE ts < ? ORDER BY ts LIMIT ?)`

// pruneOp deletes one chunk; deleted is set by the writer before done.
type pruneOp struct {
	before  int64
	limit   int
	deleted int64
}

func (*pruneOp) isOp() {}

func (p *pruneOp) apply(t *txn) error {
	res, err := t.exec(stPruneEvents, p.before, p.limit)
	if err != nil {
		return fmt.Errorf("store: prune: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: prune: %w", err)
	}
	p.deleted = n
	return nil
}

// Prune deletes the events whose timestamp is before the given time
// (retention) and returns how many it deleted. Other rows are kept. It
// deletes in chunks of a few thousand, each one short transaction of
// the writer, so concurrent writes are delayed by one chunk at most. A
// done ctx stops it between chunks; what was deleted stays deleted.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("store: prune: %w", context.Cause(ctx))
		}
		op := &pruneOp{before: before.UnixNano(), limit: s.pruneChunk}
		if err := s.Apply(ctx, op); err != nil {
			return total, err
		}
		total += op.deleted
		if op.deleted < int64(s.pruneChunk) {
			return total, nil
		}
	}
}
