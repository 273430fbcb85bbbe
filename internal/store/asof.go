package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/metis-agent/metis/internal/event"
)

// AsOf is a consistent read for projecting a session row back (or
// forward) to an event id: the row as a cursor-based subscriber left it,
// that subscriber's cursor, and the events that separate the row from
// the wanted point. Applied are events the subscriber has folded into the
// row (seq <= Cursor) that come after the point; Pending are events at or
// before the point that it has not folded in yet.
type AsOf struct {
	Session Session
	Cursor  int64
	Applied []*event.Event
	Pending []*event.Event
}

// ReadAsOf reads, in one read transaction, the session row, the cursor
// named cursorName, and the events of sessionIDs of the given types on
// either side of asOf (see AsOf). Both event lists are short in practice:
// they hold only what happened between the subscriber's position and the
// point asked for.
func (s *Store) ReadAsOf(ctx context.Context, sessionID, cursorName string, sessionIDs []string, types []event.Type, asOf string) (AsOf, error) {
	if err := s.readable(); err != nil {
		return AsOf{}, err
	}
	if len(sessionIDs) == 0 || len(types) == 0 {
		return AsOf{}, errors.New("store: read as of: no sessions or no types")
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return AsOf{}, fmt.Errorf("store: read as of: %w", err)
	}
	defer tx.Rollback()
	var out AsOf
	out.Session, err = scanSession(tx.QueryRowContext(ctx, "SELECT "+sessionCols+" FROM sessions WHERE id = ?", sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return AsOf{}, fmt.Errorf("store: read as of: session %s: %w", sessionID, err)
	}
	err = tx.QueryRowContext(ctx, "SELECT seq FROM cursors WHERE name = ?", cursorName).Scan(&out.Cursor)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return AsOf{}, fmt.Errorf("store: read as of: cursor %s: %w", cursorName, err)
	}
	args := make([]any, 0, len(sessionIDs)+len(types)+2)
	for _, id := range sessionIDs {
		args = append(args, id)
	}
	for _, t := range types {
		args = append(args, string(t))
	}
	base := "SELECT seq, body FROM events WHERE session_id IN (?" + strings.Repeat(", ?", len(sessionIDs)-1) +
		") AND type IN (?" + strings.Repeat(", ?", len(types)-1) + ")"
	out.Applied, err = queryEventsOn(ctx, tx, base+" AND seq <= ? AND id > ? ORDER BY seq", append(args, out.Cursor, asOf)...)
	if err != nil {
		return AsOf{}, fmt.Errorf("store: read as of: %w", err)
	}
	out.Pending, err = queryEventsOn(ctx, tx, base+" AND seq > ? AND id <= ? ORDER BY seq", append(args[:len(args):len(args)], out.Cursor, asOf)...)
	if err != nil {
		return AsOf{}, fmt.Errorf("store: read as of: %w", err)
	}
	return out, nil
}
