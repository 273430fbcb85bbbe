package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

const (
	sqlPutTurn = `INSERT INTO turns (id, session_id, status, reason, started_at, ended_at,
	checkpoint_id, after_checkpoint_id, changes)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	session_id = excluded.session_id,
	status     = excluded.status,
	reason     = excluded.reason,
	started_at = excluded.started_at,
	ended_at   = excluded.ended_at,
	checkpoint_id = CASE WHEN excluded.checkpoint_id <> '' THEN excluded.checkpoint_id ELSE turns.checkpoint_id END,
	after_checkpoint_id = CASE WHEN excluded.after_checkpoint_id <> '' THEN excluded.after_checkpoint_id ELSE turns.after_checkpoint_id END,
	changes = coalesce(excluded.changes, turns.changes)`

	turnCols = `id, session_id, status, reason, started_at, ended_at, checkpoint_id, after_checkpoint_id, changes`
)

func (t *txn) putTurn(tu *Turn) error {
	if tu.ID == "" || tu.SessionID == "" {
		return fmt.Errorf("store: put turn %q: missing id or session id", tu.ID)
	}
	if tu.Status == "" {
		return fmt.Errorf("store: put turn %s: empty status", tu.ID)
	}
	var changes any // NULL when unknown
	if len(tu.Changes) > 0 {
		changes = string(tu.Changes)
	}
	_, err := t.exec(stPutTurn, tu.ID, tu.SessionID, string(tu.Status), tu.Reason,
		nanos(tu.StartedAt), nanos(tu.EndedAt), tu.CheckpointID, tu.AfterCheckpointID, changes)
	if err != nil {
		return fmt.Errorf("store: put turn %s: %w", tu.ID, err)
	}
	return nil
}

// Turn returns the turn id, or an error wrapping ErrNotFound.
func (s *Store) Turn(ctx context.Context, id string) (Turn, error) {
	if err := s.readable(); err != nil {
		return Turn{}, err
	}
	ts, err := s.queryTurns(ctx, "SELECT "+turnCols+" FROM turns WHERE id = ?", id)
	if err == nil && len(ts) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return Turn{}, fmt.Errorf("store: turn %s: %w", id, err)
	}
	return ts[0], nil
}

// OpenTurns returns every turn still in flight, oldest first. After a
// crash these are the turns to close as failed or cancelled.
func (s *Store) OpenTurns(ctx context.Context) ([]Turn, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	ts, err := s.queryTurns(ctx, "SELECT "+turnCols+
		" FROM turns WHERE status = 'in_flight' ORDER BY started_at, rowid")
	if err != nil {
		return nil, fmt.Errorf("store: open turns: %w", err)
	}
	return ts, nil
}

func (s *Store) queryTurns(ctx context.Context, query string, args ...any) ([]Turn, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		var (
			tu             Turn
			status         string
			started, ended int64
			changes        sql.NullString
		)
		if err := rows.Scan(&tu.ID, &tu.SessionID, &status, &tu.Reason, &started, &ended,
			&tu.CheckpointID, &tu.AfterCheckpointID, &changes); err != nil {
			return nil, err
		}
		tu.Status, tu.StartedAt, tu.EndedAt = TurnStatus(status), fromNanos(started), fromNanos(ended)
		if changes.Valid {
			tu.Changes = json.RawMessage(changes.String)
		}
		out = append(out, tu)
	}
	return out, rows.Err()
}
