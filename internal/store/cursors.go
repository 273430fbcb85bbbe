package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SetCursor records the position of a named durable subscriber: the Seq
// of the last event it has fully handled. Submitted in the same group as
// the subscriber's own writes, it commits atomically with them, so on
// restart the subscriber resumes exactly after what it applied.
type SetCursor struct {
	Name string
	Seq  int64
}

func (SetCursor) isOp() {}

const sqlSetCursor = `INSERT INTO cursors (name, seq) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET seq = excluded.seq`

func (t *txn) setCursor(c *SetCursor) error {
	if c.Name == "" {
		return errors.New("store: set cursor: empty name")
	}
	if _, err := t.exec(stSetCursor, c.Name, c.Seq); err != nil {
		return fmt.Errorf("store: set cursor %s: %w", c.Name, err)
	}
	return nil
}

// Cursor returns the Seq last recorded with SetCursor for name, 0 if
// none was ever recorded.
func (s *Store) Cursor(ctx context.Context, name string) (int64, error) {
	if err := s.readable(); err != nil {
		return 0, err
	}
	var seq int64
	err := s.rdb.QueryRowContext(ctx, "SELECT seq FROM cursors WHERE name = ?", name).Scan(&seq)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("store: cursor %s: %w", name, err)
	}
	return seq, nil
}
