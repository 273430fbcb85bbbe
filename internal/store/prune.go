package store

import (
	"context"
	"fmt"
	"time"
)

// Retention (docs/storage.md). Prune applies --retention in three steps:
//
//  1. Events older than the cutoff are deleted, from every session: the
//     trace is a debugging record with a time limit. A live session
//     keeps its messages, turns and tool calls, which are its
//     conversation (the next turn sends it to the model) and its
//     history: those are never cut from under it.
//  2. A delegation tree (a session with no parent, or whose parent is
//     gone, and every worker below it) none of whose sessions has an
//     event left, was created after the cutoff or has a turn in flight
//     is idle past retention: it is removed whole, sessions, turns,
//     messages and tool calls.
//  3. The pages freed are returned to the file system with an
//     incremental vacuum (the database runs with auto_vacuum =
//     INCREMENTAL, see open.go).
//
// Every step runs as short transactions of the writer, so other writes
// wait one chunk at most.

// defaultPruneChunk is how many events one Prune transaction deletes at
// most, so the writer is never held long and other writes interleave.
const defaultPruneChunk = 2000

// treesPerChunk is how many idle trees one transaction removes at most.
const treesPerChunk = 64

// vacuumPagesPerStep is how many free pages one incremental vacuum
// step returns to the file system (4 MiB with the default 4 KiB page).
const vacuumPagesPerStep = 1024

// sqlPruneEvents deletes the oldest chunk of events older than a time.
const sqlPruneEvents = `DELETE FROM events WHERE seq IN
(SELECT seq FROM events WHERE ts < ? ORDER BY ts LIMIT ?)`

// sqlIdleRoots lists, by id after a key, the roots of delegation trees
// that may be idle past retention: created before the cutoff and with
// no event left. removeTreeOp checks the whole tree again.
const sqlIdleRoots = `SELECT s.id FROM sessions s
WHERE s.id > ? AND s.created_at < ?
  AND (s.parent_session_id = '' OR NOT EXISTS (SELECT 1 FROM sessions p WHERE p.id = s.parent_session_id))
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.session_id = s.id)
ORDER BY s.id LIMIT ?`

// treeCTE names the sessions of the tree rooted at ?1: the root and
// every worker below it.
const treeCTE = `WITH RECURSIVE tree(id) AS (
	SELECT ?1 UNION SELECT s.id FROM sessions s JOIN tree ON s.parent_session_id = tree.id)
`

// sqlTreeBusy is 1 if a session of the tree has an event, a turn in
// flight, or was created at or after the cutoff (?2).
const sqlTreeBusy = treeCTE + `SELECT
	EXISTS (SELECT 1 FROM tree JOIN events e ON e.session_id = tree.id)
	OR EXISTS (SELECT 1 FROM tree JOIN turns u ON u.session_id = tree.id AND u.status = 'in_flight')
	OR EXISTS (SELECT 1 FROM tree JOIN queued_turns q ON q.session_id = tree.id AND q.ended_event_id = '')
	OR EXISTS (SELECT 1 FROM tree JOIN sessions s ON s.id = tree.id AND s.created_at >= ?2)`

// sqlRemoveTree deletes the rows of every session of the tree; the
// sessions go last, since the tree is found through them.
var sqlRemoveTree = []string{
	treeCTE + `DELETE FROM tool_calls WHERE session_id IN tree`,
	treeCTE + `DELETE FROM messages WHERE session_id IN tree`,
	treeCTE + `DELETE FROM turns WHERE session_id IN tree`,
	treeCTE + `DELETE FROM queued_turns WHERE session_id IN tree`,
	// An image goes with the last session that holds it.
	treeCTE + `DELETE FROM images WHERE sha256 IN (SELECT sha256 FROM session_images WHERE session_id IN tree)
	AND NOT EXISTS (SELECT 1 FROM session_images o WHERE o.sha256 = images.sha256 AND o.session_id NOT IN tree)`,
	treeCTE + `DELETE FROM session_images WHERE session_id IN tree`,
	treeCTE + `DELETE FROM sessions WHERE id IN tree`,
}

// retentionIndexes lets the removal of a tree find its turns and tool
// calls without scanning those tables. They are not part of the
// versioned schema: Open creates them, if missing, after migrate.
const retentionIndexes = `
CREATE INDEX IF NOT EXISTS turns_session ON turns(session_id);
CREATE INDEX IF NOT EXISTS tool_calls_session ON tool_calls(session_id);
`

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

// removeTreeOp removes the delegation tree rooted at root if it is
// still idle past the cutoff when the writer applies it (a turn may
// have started since it was chosen); removed reports whether it was,
// sessions how many sessions went.
type removeTreeOp struct {
	root     string
	before   int64
	removed  bool
	sessions int64
}

func (*removeTreeOp) isOp() {}

func (o *removeTreeOp) apply(t *txn) error {
	var busy bool
	if err := t.tx.QueryRow(sqlTreeBusy, o.root, o.before).Scan(&busy); err != nil {
		return fmt.Errorf("store: prune: tree of %s: %w", o.root, err)
	}
	if busy {
		return nil
	}
	for i, q := range sqlRemoveTree {
		res, err := t.tx.Exec(q, o.root)
		if err != nil {
			return fmt.Errorf("store: prune: remove tree of %s: %w", o.root, err)
		}
		if i == len(sqlRemoveTree)-1 {
			if o.sessions, err = res.RowsAffected(); err != nil {
				return fmt.Errorf("store: prune: remove tree of %s: %w", o.root, err)
			}
		}
	}
	o.removed = true
	return nil
}

// PruneResult is what one Prune did.
type PruneResult struct {
	Events     int64 // events deleted (older than the cutoff)
	Sessions   int64 // sessions removed whole, workers included
	FreedBytes int64 // bytes the database file gave back
}

// Prune applies retention as of before (see the top of this file): it
// deletes the events older than before, removes the delegation trees
// idle since before, and returns the freed pages to the file system. A
// done ctx stops it between transactions; what was deleted stays
// deleted.
func (s *Store) Prune(ctx context.Context, before time.Time) (PruneResult, error) {
	var r PruneResult
	var err error
	if r.Events, err = s.pruneEvents(ctx, before); err != nil {
		return r, err
	}
	if r.Sessions, err = s.pruneIdleTrees(ctx, before); err != nil {
		return r, err
	}
	if r.Events > 0 || r.Sessions > 0 {
		if r.FreedBytes, err = s.Vacuum(ctx); err != nil {
			return r, err
		}
	}
	return r, nil
}

// pruneEvents deletes the events whose timestamp is before the given
// time in chunks of a few thousand, each one short transaction of the
// writer, and returns how many it deleted.
func (s *Store) pruneEvents(ctx context.Context, before time.Time) (int64, error) {
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

// pruneIdleTrees removes the trees idle since before, treesPerChunk per
// transaction, and returns how many sessions went.
func (s *Store) pruneIdleTrees(ctx context.Context, before time.Time) (int64, error) {
	if err := s.readable(); err != nil {
		return 0, err
	}
	var total int64
	after := ""
	for {
		roots, err := s.idleRoots(ctx, after, before)
		if err != nil || len(roots) == 0 {
			return total, err
		}
		after = roots[len(roots)-1]
		ops := make([]Op, len(roots))
		for i, id := range roots {
			ops[i] = &removeTreeOp{root: id, before: before.UnixNano()}
		}
		if err := s.Apply(ctx, ops...); err != nil {
			return total, err
		}
		for _, op := range ops {
			total += op.(*removeTreeOp).sessions
		}
	}
}

func (s *Store) idleRoots(ctx context.Context, after string, before time.Time) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, sqlIdleRoots, after, before.UnixNano(), treesPerChunk)
	if err != nil {
		return nil, fmt.Errorf("store: prune: idle sessions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: prune: idle sessions: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: prune: idle sessions: %w", err)
	}
	return out, nil
}

// Vacuum returns the database's free pages to the file system
// (PRAGMA incremental_vacuum, a step of vacuumPagesPerStep pages at a
// time on the write connection, so writes wait one step at most), folds
// the WAL back into the file, and returns how many bytes the file gave
// back.
func (s *Store) Vacuum(ctx context.Context) (int64, error) {
	if err := s.readable(); err != nil {
		return 0, err
	}
	var pageSize int64
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return 0, fmt.Errorf("store: vacuum: %w", err)
	}
	var freed int64
	for {
		var free int64
		if err := s.wdb.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
			return freed * pageSize, fmt.Errorf("store: vacuum: %w", err)
		}
		if free == 0 {
			break
		}
		step := min(free, vacuumPagesPerStep)
		if _, err := s.wdb.ExecContext(ctx, fmt.Sprintf("PRAGMA incremental_vacuum(%d)", step)); err != nil {
			return freed * pageSize, fmt.Errorf("store: vacuum: %w", err)
		}
		var left int64
		if err := s.wdb.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&left); err != nil {
			return freed * pageSize, fmt.Errorf("store: vacuum: %w", err)
		}
		if left >= free {
			break // nothing more to give back (auto_vacuum is not incremental)
		}
		freed += free - left
	}
	// The shorter file reaches the disk at the next checkpoint.
	if _, err := s.wdb.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return freed * pageSize, fmt.Errorf("store: vacuum: checkpoint: %w", err)
	}
	return freed * pageSize, nil
}
