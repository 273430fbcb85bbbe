package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/metis-agent/metis/internal/event"
)

// LatestEvents reads one session's newest events with an id at or
// before upToID ("" for no bound), newest first, at most limit of them,
// calling fn for each until it returns false, and returns how many it
// read. Every column a
// replay needs is set, r.TS included (r.Seq is left zero); r.Body is only
// valid during the call to fn (the driver's buffer): fn must copy what
// it keeps, and must not block. It follows the (session_id, id) index
// backwards, so its cost grows with what it reads, not with the
// session's history: the hub fills its replay window with it.
func (s *Store) LatestEvents(ctx context.Context, sessionID, upToID string, limit int, fn func(r *EventRow) bool) (int, error) {
	if err := s.readable(); err != nil {
		return 0, err
	}
	if sessionID == "" || limit <= 0 {
		return 0, fmt.Errorf("store: latest events: want a session and a positive limit, got %q and %d", sessionID, limit)
	}
	q := EventQuery{SessionIDs: []string{sessionID}, UpToID: upToID}
	where, args, err := eventWhere(&q)
	if err != nil {
		return 0, fmt.Errorf("store: latest events: %w", err)
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT id, type, actor, ts, body FROM events WHERE "+where+" ORDER BY id DESC LIMIT ?",
		append(args, limit)...)
	if err != nil {
		return 0, fmt.Errorf("store: latest events of %s: %w", sessionID, err)
	}
	defer rows.Close()
	n := 0
	var (
		typ  string
		ts   int64
		body sql.RawBytes
	)
	r := EventRow{SessionID: sessionID}
	for rows.Next() {
		if err := rows.Scan(&r.ID, &typ, &r.Actor, &ts, &body); err != nil {
			return n, fmt.Errorf("store: latest events of %s: %w", sessionID, err)
		}
		r.Type, r.TS, r.Body = event.Type(typ), fromNanos(ts), body
		n++
		if !fn(&r) {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("store: latest events of %s: %w", sessionID, err)
	}
	return n, nil
}
