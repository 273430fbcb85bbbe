package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SummaryAsOf is a session's title, last activity and queue as a
// snapshot at event id asOf shows them (the queue: QueuedTurnsAsOf): the title only once the session's first
// user message is at or before asOf (the rule MessagesAsOf follows),
// and the last activity at the newest of the session's events at or
// before asOf. With no such event (retention removed them) the row's
// last activity stands.
func (s *Store) SummaryAsOf(ctx context.Context, sessionID, asOf string) (Session, error) {
	if err := s.readable(); err != nil {
		return Session{}, err
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Session{}, fmt.Errorf("store: summary of session %s: %w", sessionID, err)
	}
	defer tx.Rollback()
	ss, err := scanSession(tx.QueryRowContext(ctx, "SELECT "+sessionCols+" FROM sessions WHERE id = ?", sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: summary of session %s: %w", sessionID, err)
	}
	if ss.Title != "" {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM messages
WHERE session_id = ? AND role = 'user' AND event_id <= ? LIMIT 1`, sessionID, asOf).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			ss.Title = ""
		case err != nil:
			return Session{}, fmt.Errorf("store: summary of session %s: title: %w", sessionID, err)
		}
	}
	var ts int64
	err = tx.QueryRowContext(ctx, `SELECT ts FROM events
WHERE session_id = ? AND id <= ? AND `+sqlActivityTerm+` ORDER BY id DESC LIMIT 1`, sessionID, asOf).Scan(&ts)
	switch {
	case err == nil:
		ss.LastActivityAt = fromNanos(ts)
	case !errors.Is(err, sql.ErrNoRows):
		return Session{}, fmt.Errorf("store: summary of session %s: last activity: %w", sessionID, err)
	}
	queued, err := s.queryQueued(ctx, tx, sqlQueuedAsOf, sessionID, asOf, asOf)
	if err != nil {
		return Session{}, fmt.Errorf("store: summary of session %s: %w", sessionID, err)
	}
	ss.Queued = WireQueue(queued)
	return ss, nil
}
