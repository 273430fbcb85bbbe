package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

const sqlInsertEvent = `INSERT INTO events (id, session_id, type, turn_id, ts, actor, body)
VALUES (?, ?, ?, ?, ?, ?, ?)`

// appendEvent stores the event's envelope bytes as they are (JSON
// returns the sealed bytes without encoding), moves its session's last
// activity to the event's time (not for a meta event: a client
// attaching is not activity, see Activity), and records the assigned seq for
// publication after commit.
func (t *txn) appendEvent(ev *event.Event) error {
	if ev == nil {
		return errors.New("store: append event: nil event")
	}
	if ev.ID == "" || ev.SessionID == "" {
		return fmt.Errorf("store: append event %q: missing id or session id", ev.String())
	}
	res, err := t.exec(stInsertEvent,
		ev.ID, ev.SessionID, string(ev.Type), nullString(ev.TurnID), nanos(ev.TS), ev.Actor, ev.JSON())
	if err != nil {
		if isUnique(err) {
			err = fmt.Errorf("%w: %w", ErrDuplicate, err)
		}
		return fmt.Errorf("store: append event %s: %w", ev.ID, err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("store: append event %s: seq: %w", ev.ID, err)
	}
	if Activity(ev.Type) {
		if err := t.touchSession(ev.SessionID, nanos(ev.TS)); err != nil {
			return err
		}
	}
	t.seqs = append(t.seqs, seqAssign{ev: ev, seq: seq})
	return nil
}

// Activity reports whether an event of type typ counts as a session's
// activity (last_activity_at): every catalog event but the bus's meta
// events (bus.*), which say that clients attached or were slow, not that
// the session did anything.
func Activity(typ event.Type) bool { return !strings.HasPrefix(string(typ), "bus.") }

// sqlActivityTerm is Activity as SQL on the events table.
const sqlActivityTerm = `type NOT LIKE 'bus.%'`

// eventWhere builds the WHERE clause and arguments of q.
func eventWhere(q *EventQuery) (string, []any, error) {
	if len(q.SessionIDs) == 0 {
		return "", nil, errors.New("no session id")
	}
	var b strings.Builder
	args := make([]any, 0, len(q.SessionIDs)+len(q.Types)+2)
	if len(q.SessionIDs) == 1 {
		b.WriteString("session_id = ?")
	} else {
		b.WriteString("session_id IN (?" + strings.Repeat(", ?", len(q.SessionIDs)-1) + ")")
	}
	for _, id := range q.SessionIDs {
		args = append(args, id)
	}
	if q.AfterID != "" {
		b.WriteString(" AND id > ?")
		args = append(args, q.AfterID)
	}
	if q.UpToID != "" {
		b.WriteString(" AND id <= ?")
		args = append(args, q.UpToID)
	}
	if len(q.Types) == 1 {
		b.WriteString(" AND type = ?")
	} else if len(q.Types) > 1 {
		b.WriteString(" AND type IN (?" + strings.Repeat(", ?", len(q.Types)-1) + ")")
	}
	for _, t := range q.Types {
		args = append(args, string(t))
	}
	if len(q.Actors) > 0 {
		b.WriteString(" AND actor IN (?" + strings.Repeat(", ?", len(q.Actors)-1) + ")")
		for _, a := range q.Actors {
			args = append(args, a)
		}
	}
	return b.String(), args, nil
}

// EventRow is a stored event as its columns and envelope bytes, not
// decoded.
type EventRow struct {
	Seq       int64
	ID        string
	SessionID string
	Type      event.Type
	Actor     string
	TS        time.Time
	Body      []byte // the sealed envelope; fresh per row, safe to keep
}

// ScanEvents calls fn for each event matching q, ascending by id, without
// decoding it, and stops at fn's first error. The rows stream from one
// read: fn may be slow (replay writes to a socket from it), at the cost
// of holding one read connection meanwhile.
func (s *Store) ScanEvents(ctx context.Context, q EventQuery, fn func(EventRow) error) error {
	if err := s.readable(); err != nil {
		return err
	}
	where, args, err := eventWhere(&q)
	if err != nil {
		return fmt.Errorf("store: scan events: %w", err)
	}
	query := "SELECT seq, id, session_id, type, actor, ts, body FROM events WHERE " + where + " ORDER BY id"
	if q.Limit > 0 {
		query += " LIMIT ?"
		args = append(args, q.Limit)
	}
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("store: scan events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r EventRow
		var typ string
		var ts int64
		if err := rows.Scan(&r.Seq, &r.ID, &r.SessionID, &typ, &r.Actor, &ts, &r.Body); err != nil {
			return fmt.Errorf("store: scan events: %w", err)
		}
		r.Type, r.TS = event.Type(typ), fromNanos(ts)
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: scan events: %w", err)
	}
	return nil
}

// ScanEventBatch is one batch of a long ordered read of one session's
// events, such as a replay: it calls fn for at most limit events
// matching q (q.Limit is ignored), ascending by id, and returns how many
// it read. Fewer than limit means the read reached the end; otherwise
// the caller continues with q.AfterID set to the last id it got. Each
// batch is one short query, so a slow consumer holds no read connection
// between batches.
//
// q must name exactly one session: ordered by id across sessions, every
// batch would sort what is left of the whole range (a reader of several
// sessions merges one read per session instead). Only what a replay
// needs is read: r.ID, r.Type, r.Actor and r.Body, with r.SessionID set
// from q; r.Seq and r.TS are left zero. r.Body is only valid during
// the call to fn (the driver's buffer, not a copy): fn must copy what it
// keeps, and must not block.
func (s *Store) ScanEventBatch(ctx context.Context, q EventQuery, limit int, fn func(r *EventRow)) (int, error) {
	if err := s.readable(); err != nil {
		return 0, err
	}
	if len(q.SessionIDs) != 1 || limit <= 0 {
		return 0, fmt.Errorf("store: scan event batch: want one session and a positive limit, got %d sessions and limit %d",
			len(q.SessionIDs), limit)
	}
	where, args, err := eventWhere(&q)
	if err != nil {
		return 0, fmt.Errorf("store: scan event batch: %w", err)
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT id, type, actor, body FROM events WHERE "+where+" ORDER BY id LIMIT ?",
		append(args, limit)...)
	if err != nil {
		return 0, fmt.Errorf("store: scan event batch: %w", err)
	}
	defer rows.Close()
	n := 0
	var (
		typ  string
		body sql.RawBytes
	)
	r := EventRow{SessionID: q.SessionIDs[0]}
	for rows.Next() {
		if err := rows.Scan(&r.ID, &typ, &r.Actor, &body); err != nil {
			return n, fmt.Errorf("store: scan event batch: %w", err)
		}
		r.Type, r.Body = event.Type(typ), body
		fn(&r)
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("store: scan event batch: %w", err)
	}
	return n, nil
}

// Events returns the stored events matching q, ascending by id (across
// sessions too: ids are ULIDs, so that is time order), at most q.Limit
// of them when it is positive. Each event is sealed with its stored
// bytes and has Seq set.
func (s *Store) Events(ctx context.Context, q EventQuery) ([]*event.Event, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	where, args, err := eventWhere(&q)
	if err != nil {
		return nil, fmt.Errorf("store: events: %w", err)
	}
	query := "SELECT seq, body FROM events WHERE " + where + " ORDER BY id"
	if q.Limit > 0 {
		query += " LIMIT ?"
		args = append(args, q.Limit)
	}
	evs, err := s.queryEvents(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: events of %v: %w", q.SessionIDs, err)
	}
	return evs, nil
}

const sqlDelegations = `SELECT seq, body FROM events INDEXED BY events_delegate
WHERE session_id = ? AND id <= ? AND ` + delegateTerm + ` ORDER BY id`

// Delegations returns a session's delegate.started, delegate.completed
// and delegate.failed events up to upToID (inclusive), ascending by id.
// A partial index holds only these events, so the cost does not grow
// with the session's other events.
func (s *Store) Delegations(ctx context.Context, sessionID, upToID string) ([]*event.Event, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	evs, err := s.queryEvents(ctx, sqlDelegations, sessionID, upToID)
	if err != nil {
		return nil, fmt.Errorf("store: delegations of %s: %w", sessionID, err)
	}
	return evs, nil
}

// CountEvents counts the stored events matching q, ignoring q.Limit,
// without decoding any. Without a type filter it reads only the
// (session, id) index, so it is cheap enough to decide whether a replay
// is too large; with one it also reads the type of each event in the id
// range, about ten times slower. (An index covering the type would
// halve append throughput.) The count without types bounds the count
// with them, so a caller enforcing a cap can try it first.
func (s *Store) CountEvents(ctx context.Context, q EventQuery) (int, error) {
	if err := s.readable(); err != nil {
		return 0, err
	}
	where, args, err := eventWhere(&q)
	if err != nil {
		return 0, fmt.Errorf("store: count events: %w", err)
	}
	var n int
	if err := s.rdb.QueryRowContext(ctx, "SELECT count(*) FROM events WHERE "+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count events of %v: %w", q.SessionIDs, err)
	}
	return n, nil
}

// EventsAfterSeq returns the events whose Seq is greater than afterSeq,
// in global append order, at most limit of them when it is positive.
// Subscribers use it to catch up from the last Seq they saw.
func (s *Store) EventsAfterSeq(ctx context.Context, afterSeq int64, limit int) ([]*event.Event, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	query := "SELECT seq, body FROM events WHERE seq > ? ORDER BY seq"
	args := []any{afterSeq}
	if limit > 0 {
		query += " LIMIT ?"
		args = append(args, limit)
	}
	evs, err := s.queryEvents(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: events after seq %d: %w", afterSeq, err)
	}
	return evs, nil
}

// queryEvents runs a query selecting (seq, body) and decodes the rows.
func (s *Store) queryEvents(ctx context.Context, query string, args ...any) ([]*event.Event, error) {
	return queryEventsOn(ctx, s.rdb, query, args...)
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func queryEventsOn(ctx context.Context, q querier, query string, args ...any) ([]*event.Event, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var evs []*event.Event
	for rows.Next() {
		var (
			seq  int64
			body []byte // a fresh copy per row: the event keeps it
		)
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, err
		}
		ev, err := event.Decode(body)
		if err != nil {
			return nil, fmt.Errorf("seq %d: %w", seq, err)
		}
		ev.Seq = seq
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return evs, nil
}

// EventAtOrBefore returns the greatest event id stored for one of the
// sessions that is at or before id: id itself if it is stored, "" if
// nothing at or before it is (it precedes what retention kept). One
// index seek per session.
func (s *Store) EventAtOrBefore(ctx context.Context, sessionIDs []string, id string) (string, error) {
	if err := s.readable(); err != nil {
		return "", err
	}
	best := ""
	for _, sid := range sessionIDs {
		var at string
		err := s.rdb.QueryRowContext(ctx,
			"SELECT id FROM events WHERE session_id = ? AND id <= ? ORDER BY id DESC LIMIT 1", sid, id).Scan(&at)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return "", fmt.Errorf("store: event of %s at or before %s: %w", sid, id, err)
		default:
			best = max(best, at)
		}
	}
	return best, nil
}

// LastEventID returns the greatest event id stored for the session, ""
// if it has none (or all were pruned).
func (s *Store) LastEventID(ctx context.Context, sessionID string) (string, error) {
	return s.edgeEventID(ctx, sessionID, "DESC")
}

// OldestEventID returns the smallest event id stored for the session, ""
// if it has none. Events before it were pruned or never existed.
func (s *Store) OldestEventID(ctx context.Context, sessionID string) (string, error) {
	return s.edgeEventID(ctx, sessionID, "ASC")
}

func (s *Store) edgeEventID(ctx context.Context, sessionID, dir string) (string, error) {
	if err := s.readable(); err != nil {
		return "", err
	}
	var id string
	err := s.rdb.QueryRowContext(ctx,
		"SELECT id FROM events WHERE session_id = ? ORDER BY id "+dir+" LIMIT 1", sessionID).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("store: event ids of %s: %w", sessionID, err)
	}
	return id, nil
}
