package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// What users do to their sessions from the list: rename, archive,
// delete (PATCH and DELETE /sessions/{id}).

// Rename sets a session's title (passed through Title); a missing
// session fails with ErrNotFound. Unlike SetTitle it replaces a title
// already there, and the first turn's SetTitle then leaves it.
type Rename struct {
	SessionID string
	Title     string
}

// SetArchived archives a session or brings it back; a missing session
// fails with ErrNotFound.
type SetArchived struct {
	SessionID string
	Archived  bool
}

func (Rename) isOp()      {}
func (SetArchived) isOp() {}

func (o Rename) apply(t *txn) error {
	res, err := t.tx.Exec(`UPDATE sessions SET title = ?1 WHERE id = ?2`, Title(o.Title), o.SessionID)
	if err != nil {
		return fmt.Errorf("store: rename session %s: %w", o.SessionID, err)
	}
	return mustAffect(res, "rename session", o.SessionID)
}

func (o SetArchived) apply(t *txn) error {
	res, err := t.tx.Exec(`UPDATE sessions SET archived = ?1 WHERE id = ?2`, o.Archived, o.SessionID)
	if err != nil {
		return fmt.Errorf("store: archive session %s: %w", o.SessionID, err)
	}
	return mustAffect(res, "archive session", o.SessionID)
}

// ErrBusy is returned (wrapped) by DeleteTree when a session of the tree
// has a turn in flight.
var ErrBusy = errors.New("a session of the tree has a turn in flight")

// deleteTreeOp removes a session and every worker below it, events
// included, unless one of them has a turn in flight.
type deleteTreeOp struct {
	root     string
	sessions int64
}

func (*deleteTreeOp) isOp() {}

// sqlTreeInFlight is 1 if a session of the tree rooted at ?1 has a turn
// in flight.
const sqlTreeInFlight = treeCTE + `SELECT EXISTS (SELECT 1 FROM tree JOIN turns u ON u.session_id = tree.id AND u.status = 'in_flight')`

func (o *deleteTreeOp) apply(t *txn) error {
	var busy bool
	if err := t.tx.QueryRow(sqlTreeInFlight, o.root).Scan(&busy); err != nil {
		return fmt.Errorf("store: delete session %s: %w", o.root, err)
	}
	if busy {
		return fmt.Errorf("store: delete session %s: %w", o.root, ErrBusy)
	}
	n, err := removeTree(t, o.root)
	if err != nil {
		return err
	}
	if o.sessions = n; n == 0 {
		return fmt.Errorf("store: delete session %s: %w", o.root, ErrNotFound)
	}
	return nil
}

// removeTree deletes the session root and every worker below it, events
// included, whatever their state, and returns how many sessions went.
func removeTree(t *txn, root string) (int64, error) {
	var sessions int64
	steps := append([]string{treeCTE + `DELETE FROM events WHERE session_id IN tree`}, sqlRemoveTree...)
	for i, q := range steps {
		res, err := t.tx.Exec(q, root)
		if err != nil {
			return 0, fmt.Errorf("store: delete session %s: %w", root, err)
		}
		if i == len(steps)-1 {
			if sessions, err = res.RowsAffected(); err != nil {
				return 0, fmt.Errorf("store: delete session %s: %w", root, err)
			}
		}
	}
	return sessions, nil
}

// RemoveTree removes a session and every worker below it whole, as
// DeleteTree does, but as an op of a group: whatever state the tree is
// in (the node that deleted it checked that none of it was running),
// and a session the store does not hold is nothing to do, so applying
// it again is harmless. It is how a deletion reaches the stores of a
// cluster's other nodes.
type RemoveTree struct {
	SessionID string
}

func (RemoveTree) isOp() {}

func (o RemoveTree) apply(t *txn) error {
	_, err := removeTree(t, o.SessionID)
	return err
}

// DeleteTree removes a session and its workers (every worker below it)
// whole: events, messages, turns, tool calls and the session rows, in
// one transaction. It returns how many sessions went; ErrNotFound for
// an unknown session, ErrBusy while one of them has a turn in flight.
func (s *Store) DeleteTree(ctx context.Context, id string) (int64, error) {
	op := &deleteTreeOp{root: id}
	if err := s.Apply(ctx, op); err != nil {
		return 0, err
	}
	return op.sessions, nil
}

// ensureArchived adds sessions.archived to a database without it. The
// column is added outside the numbered migrations, the way Open adds
// the retention indexes: it is checked on every open, so databases of
// every schema version get it once.
func ensureArchived(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('sessions') WHERE name = 'archived'`).Scan(&n)
	if err != nil {
		return fmt.Errorf("schema: sessions.archived: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0`); err != nil {
		return fmt.Errorf("schema: sessions.archived: %w", err)
	}
	return nil
}
