package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/metis-agent/metis/internal/message"
)

const (
	// sqlPutMessage upserts by id without touching seq, so a replaced
	// message keeps the position of its first insertion.
	sqlPutMessage = `INSERT INTO messages (id, session_id, turn_id, role, content, status, model, usage, created_at, event_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	session_id = excluded.session_id,
	turn_id    = excluded.turn_id,
	role       = excluded.role,
	content    = excluded.content,
	status     = excluded.status,
	model      = excluded.model,
	usage      = excluded.usage,
	created_at = excluded.created_at,
	event_id   = excluded.event_id`

	messageCols = `seq, id, session_id, turn_id, role, content, status, model, usage, created_at`
)

func (t *txn) putMessage(op *PutMessage) error {
	m := &op.Message
	if m.ID == "" || m.SessionID == "" {
		return fmt.Errorf("store: put message %q: missing id or session id", m.ID)
	}
	content, err := json.Marshal(m.Content)
	if err != nil {
		return fmt.Errorf("store: put message %s: content: %w", m.ID, err)
	}
	var usage sql.NullString
	if m.Usage != nil {
		b, err := json.Marshal(m.Usage)
		if err != nil {
			return fmt.Errorf("store: put message %s: usage: %w", m.ID, err)
		}
		usage = sql.NullString{String: string(b), Valid: true}
	}
	_, err = t.exec(stPutMessage, m.ID, m.SessionID, m.TurnID, string(m.Role), string(content),
		string(m.Status), m.Model, usage, nanos(m.CreatedAt), op.EventID)
	if err != nil {
		return fmt.Errorf("store: put message %s: %w", m.ID, err)
	}
	return nil
}

// Messages returns one page of a session's conversation: of the messages
// inserted before message beforeID ("" for the newest end), the limit
// newest (all of them if limit <= 0), oldest first. hasMore reports
// whether older messages remain before the page; pass the page's first
// id as beforeID to fetch them. Order is the order of first insertion.
// A beforeID that is not a message of the session yields an error
// wrapping ErrNotFound.
func (s *Store) Messages(ctx context.Context, sessionID, beforeID string, limit int) (msgs []message.Message, hasMore bool, err error) {
	if err := s.readable(); err != nil {
		return nil, false, err
	}
	query := "SELECT " + messageCols + " FROM messages WHERE session_id = ?"
	args := []any{sessionID}
	if beforeID != "" {
		var seq int64
		err := s.rdb.QueryRowContext(ctx,
			"SELECT seq FROM messages WHERE id = ? AND session_id = ?", beforeID, sessionID).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			err = ErrNotFound
		}
		if err != nil {
			return nil, false, fmt.Errorf("store: messages of %s before %s: %w", sessionID, beforeID, err)
		}
		query += " AND seq < ?"
		args = append(args, seq)
	}
	query += " ORDER BY seq DESC"
	if limit > 0 {
		query += " LIMIT ?"
		args = append(args, limit+1) // one more tells whether older ones exist
	}
	msgs, err = s.queryMessages(ctx, query, args...)
	if err != nil {
		return nil, false, fmt.Errorf("store: messages of %s: %w", sessionID, err)
	}
	if limit > 0 && len(msgs) > limit {
		msgs, hasMore = msgs[:limit], true
	}
	slices.Reverse(msgs)
	return msgs, hasMore, nil
}

// MessagesAsOf returns the limit newest messages of a session written
// with an event whose id is at most eventID (plus rows written without
// an event), oldest first, and whether older ones exist. It is the
// message list of a snapshot consistent as of eventID: a row committed
// together with a later event is not included.
func (s *Store) MessagesAsOf(ctx context.Context, sessionID, eventID string, limit int) (msgs []message.Message, hasMore bool, err error) {
	if err := s.readable(); err != nil {
		return nil, false, err
	}
	query := "SELECT " + messageCols + " FROM messages WHERE session_id = ? AND event_id <= ? ORDER BY seq DESC"
	args := []any{sessionID, eventID}
	if limit > 0 {
		query += " LIMIT ?"
		args = append(args, limit+1)
	}
	msgs, err = s.queryMessages(ctx, query, args...)
	if err != nil {
		return nil, false, fmt.Errorf("store: messages of %s as of %s: %w", sessionID, eventID, err)
	}
	if limit > 0 && len(msgs) > limit {
		msgs, hasMore = msgs[:limit], true
	}
	slices.Reverse(msgs)
	return msgs, hasMore, nil
}

// Message returns the message id, or an error wrapping ErrNotFound.
func (s *Store) Message(ctx context.Context, id string) (message.Message, error) {
	if err := s.readable(); err != nil {
		return message.Message{}, err
	}
	msgs, err := s.queryMessages(ctx, "SELECT "+messageCols+" FROM messages WHERE id = ?", id)
	if err == nil && len(msgs) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return message.Message{}, fmt.Errorf("store: message %s: %w", id, err)
	}
	return msgs[0], nil
}

func (s *Store) queryMessages(ctx context.Context, query string, args ...any) ([]message.Message, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []message.Message
	for rows.Next() {
		var (
			m            message.Message
			seq, created int64
			role, status string
			content      []byte
			usage        []byte
		)
		if err := rows.Scan(&seq, &m.ID, &m.SessionID, &m.TurnID, &role, &content, &status,
			&m.Model, &usage, &created); err != nil {
			return nil, err
		}
		m.Role, m.Status, m.CreatedAt = message.Role(role), message.Status(status), fromNanos(created)
		if err := json.Unmarshal(content, &m.Content); err != nil {
			return nil, fmt.Errorf("message %s: content: %w", m.ID, err)
		}
		if usage != nil {
			m.Usage = new(message.Usage)
			if err := json.Unmarshal(usage, m.Usage); err != nil {
				return nil, fmt.Errorf("message %s: usage: %w", m.ID, err)
			}
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
