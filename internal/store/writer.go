package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/metis-agent/metis/internal/event"
)

// ErrDuplicate is returned (wrapped) for an op that would insert a row
// whose key already exists: an event id already stored for its session,
// or a session id already created.
var ErrDuplicate = errors.New("duplicate")

// maxExclusions bounds how many failing submissions the writer cuts out
// of one batch before it gives up on grouping and commits the rest of
// the batch one submission per transaction.
const maxExclusions = 8

// submission is one group of ops handed to the writer.
type submission struct {
	ops  []Op
	done func(error)
}

// internalOp is an op defined by the store itself (Prune's chunks); the
// writer applies it by calling apply inside the batch transaction.
type internalOp interface {
	Op
	apply(t *txn) error
}

// Submit queues ops to be applied, in order, as one atomic group by the
// writer goroutine, and returns without waiting for them. Submissions
// are applied in the order Submit is called (concurrent calls in the
// order they reach the queue) and consecutive ones share transactions.
//
// done, if not nil, is called exactly once, on the writer goroutine,
// after the transaction holding the group has committed (err == nil) or
// with the reason the group was not committed (nothing of it is then
// stored). Within one batch the done callbacks run in submission order.
// For every AppendEvent of the group, Event.Seq is set before done runs.
// done must be quick and must not block: the next batch waits for it. It
// must not call Close nor Apply, and calling Submit from it may deadlock
// when the queue is full.
//
// Submit blocks only while the queue is full. After Close it calls
// done(ErrClosed) at once, on the caller's goroutine. The store keeps
// ops and the events they point to until done is called; callers must
// not modify them meanwhile.
func (s *Store) Submit(ops []Op, done func(error)) {
	s.mu.RLock()
	if s.closed.Load() {
		s.mu.RUnlock()
		if done != nil {
			done(ErrClosed)
		}
		return
	}
	s.queue <- submission{ops: ops, done: done}
	s.mu.RUnlock()
	s.stats.submissions.Add(1)
	s.stats.ops.Add(uint64(len(ops)))
}

// Apply submits ops as one group and waits for the outcome. A done ctx
// stops the wait only: the ops stay queued and may still be committed.
func (s *Store) Apply(ctx context.Context, ops ...Op) error {
	ch := make(chan error, 1)
	s.Submit(ops, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("store: apply: %w", context.Cause(ctx))
	}
}

// Stats are cumulative writer counters, for metrics and tests.
type Stats struct {
	Submissions uint64 // submissions accepted by Submit
	Ops         uint64 // ops in those submissions
	Commits     uint64 // write transactions committed
	Rollbacks   uint64 // write transactions abandoned because an op or the commit failed
	Failed      uint64 // submissions whose done received an error (ErrClosed excluded)
	Queued      int    // submissions waiting for the writer right now
}

type stats struct {
	submissions, ops, commits, rollbacks, failed atomic.Uint64
}

// Stats returns the writer counters.
func (s *Store) Stats() Stats {
	return Stats{
		Submissions: s.stats.submissions.Load(),
		Ops:         s.stats.ops.Load(),
		Commits:     s.stats.commits.Load(),
		Rollbacks:   s.stats.rollbacks.Load(),
		Failed:      s.stats.failed.Load(),
		Queued:      len(s.queue),
	}
}

// run is the writer goroutine: it takes every submission already queued,
// up to maxBatch ops, commits them as one transaction, reports, and
// repeats until the queue is closed and empty.
func (s *Store) run() {
	defer close(s.stopped)
	var (
		batch []submission
		errs  []error
		carry submission // taken from the queue but left for the next batch
		have  bool
	)
	for {
		if !have {
			sub, ok := <-s.queue
			if !ok {
				return
			}
			carry = sub
		}
		batch = append(batch[:0], carry)
		n := len(carry.ops)
		have = false
	drain:
		for n < s.maxBatch {
			select {
			case sub, ok := <-s.queue:
				if !ok {
					break drain
				}
				if n+len(sub.ops) > s.maxBatch {
					carry, have = sub, true
					break drain
				}
				batch = append(batch, sub)
				n += len(sub.ops)
			default:
				break drain
			}
		}
		errs = s.commit(batch, errs)
		clear(batch) // drop references to ops and callbacks
	}
}

// commit applies batch and calls every done callback in order. It first
// tries the whole batch in one transaction. When an op fails, the batch
// is rolled back and retried without the submission holding that op
// (the submissions before it succeeded; it failed given their effects,
// so it fails alone too). After maxExclusions such failures, or when
// BEGIN or COMMIT itself fails, the remaining submissions are committed
// one per transaction. errs is scratch space, returned for reuse.
func (s *Store) commit(batch []submission, errs []error) []error {
	if cap(errs) < len(batch) {
		errs = make([]error, len(batch))
	} else {
		errs = errs[:len(batch)]
		clear(errs)
	}
	for attempt := 0; ; attempt++ {
		failed, err := s.runTx(batch, errs)
		if err == nil {
			break
		}
		s.stats.rollbacks.Add(1)
		if failed >= 0 && attempt < maxExclusions {
			errs[failed] = err
			continue
		}
		s.log.Warn("store: batch failed; committing its submissions one by one",
			"submissions", len(batch), "err", err)
		if failed >= 0 {
			errs[failed] = err
		}
		for i := range batch {
			if errs[i] != nil {
				continue
			}
			if _, err := s.runTx(batch[i:i+1], errs[i:i+1]); err != nil {
				s.stats.rollbacks.Add(1)
				errs[i] = err
			}
		}
		break
	}
	for i := range batch {
		if errs[i] != nil {
			s.stats.failed.Add(1)
			s.log.Debug("store: submission failed", "ops", len(batch[i].ops), "err", errs[i])
		}
		if done := batch[i].done; done != nil {
			done(errs[i])
		}
	}
	return errs
}

// runTx applies, in one transaction, the submissions of batch whose errs
// entry is nil. On an op failure it rolls back and returns the index of
// the failing submission with the error; on a BEGIN or COMMIT failure it
// returns -1 and the error. After a commit it sets the Seq of every
// appended event.
func (s *Store) runTx(batch []submission, errs []error) (int, error) {
	live := false
	for i := range batch {
		if errs[i] == nil {
			live = true
			break
		}
	}
	if !live {
		return -1, nil
	}
	tx, err := s.wdb.Begin()
	if err != nil {
		return -1, fmt.Errorf("store: begin: %w", err)
	}
	if s.touchBuf == nil {
		s.touchBuf = make(map[string]int64)
	}
	t := txn{tx: tx, base: &s.stmts, seqs: s.seqBuf[:0], touched: s.touchBuf}
	defer func() {
		clear(t.seqs) // drop the events
		s.seqBuf = t.seqs[:0]
		clear(t.touched)
	}()
	for i := range batch {
		if errs[i] != nil {
			continue
		}
		for _, op := range batch[i].ops {
			if err := t.apply(op); err != nil {
				if rerr := tx.Rollback(); rerr != nil {
					s.log.Error("store: rollback failed", "err", rerr)
				}
				return i, err
			}
		}
	}
	if err := t.flushTouches(); err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			s.log.Error("store: rollback failed", "err", rerr)
		}
		return -1, err
	}
	if err := s.injected(batch, errs); err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			s.log.Error("store: rollback failed", "err", rerr)
		}
		return -1, fmt.Errorf("store: commit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		// A failed COMMIT may leave the transaction open on the
		// connection; end it so the next BEGIN works.
		_, _ = s.wdb.Exec("ROLLBACK")
		return -1, fmt.Errorf("store: commit: %w", err)
	}
	s.stats.commits.Add(1)
	for _, a := range t.seqs {
		a.ev.Seq = a.seq
	}
	return -1, nil
}

// Writer statements, prepared once on the write connection and bound to
// each transaction on first use.
type stmtID int

const (
	stInsertEvent stmtID = iota
	stInsertSession
	stUpdateSession
	stAddUsage
	stPutMessage
	stPutTurn
	stPutToolCall
	stPruneEvents
	stSetCursor
	stSetTitle
	stTouchSession
	stSetContext
	stSetBudget
	numStmts
)

var writerSQL = [numStmts]string{
	stInsertEvent:   sqlInsertEvent,
	stInsertSession: sqlInsertSession,
	stUpdateSession: sqlUpdateSession,
	stAddUsage:      sqlAddUsage,
	stPutMessage:    sqlPutMessage,
	stPutTurn:       sqlPutTurn,
	stPutToolCall:   sqlPutToolCall,
	stPruneEvents:   sqlPruneEvents,
	stSetCursor:     sqlSetCursor,
	stSetTitle:      sqlSetTitle,
	stTouchSession:  sqlTouchSession,
	stSetContext:    sqlSetContext,
	stSetBudget:     sqlSetBudget,
}

type writerStmts [numStmts]*sql.Stmt

func prepareWriter(ctx context.Context, db *sql.DB) (writerStmts, error) {
	var st writerStmts
	for i, q := range writerSQL {
		p, err := db.PrepareContext(ctx, q)
		if err != nil {
			st.close()
			return writerStmts{}, fmt.Errorf("prepare %q: %w", q, err)
		}
		st[i] = p
	}
	return st, nil
}

func (st *writerStmts) close() {
	for _, p := range st {
		if p != nil {
			p.Close()
		}
	}
}

// txn is one write transaction of the writer goroutine.
type txn struct {
	tx    *sql.Tx
	base  *writerStmts
	stmts [numStmts]*sql.Stmt
	seqs  []seqAssign // Seq values to publish after commit
	// touched holds each session's newest event time (unix nanoseconds)
	// in this transaction: last_activity_at is written once per session
	// at the end of the transaction, not once per event.
	touched map[string]int64
}

type seqAssign struct {
	ev  *event.Event
	seq int64
}

// exec runs a prepared writer statement in the transaction.
func (t *txn) exec(id stmtID, args ...any) (sql.Result, error) {
	st := t.stmts[id]
	if st == nil {
		st = t.tx.Stmt(t.base[id])
		t.stmts[id] = st
	}
	return st.Exec(args...)
}

// apply applies one op. Ops may be passed by value or by pointer.
func (t *txn) apply(op Op) error {
	switch op := op.(type) {
	case AppendEvent:
		return t.appendEvent(op.Event)
	case *AppendEvent:
		return t.appendEvent(op.Event)
	case CreateSession:
		return t.createSession(&op.Session)
	case *CreateSession:
		return t.createSession(&op.Session)
	case UpdateSession:
		return t.updateSession(&op)
	case *UpdateSession:
		return t.updateSession(op)
	case AddUsage:
		return t.addUsage(&op)
	case *AddUsage:
		return t.addUsage(op)
	case PutMessage:
		return t.putMessage(&op)
	case *PutMessage:
		return t.putMessage(op)
	case PutTurn:
		return t.putTurn(&op.Turn)
	case *PutTurn:
		return t.putTurn(&op.Turn)
	case PutToolCall:
		return t.putToolCall(&op.Call)
	case *PutToolCall:
		return t.putToolCall(&op.Call)
	case SetTitle:
		return t.setTitle(&op)
	case *SetTitle:
		return t.setTitle(op)
	case SetCursor:
		return t.setCursor(&op)
	case *SetCursor:
		return t.setCursor(op)
	case internalOp:
		return op.apply(t)
	case nil:
		return errors.New("store: nil op")
	}
	return fmt.Errorf("store: unsupported op %T", op)
}

// mustAffect turns an update that matched no row into ErrNotFound.
func mustAffect(res sql.Result, what, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: %s %s: %w", what, id, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s %s: %w", what, id, ErrNotFound)
	}
	return nil
}

// isUnique reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code()
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}
