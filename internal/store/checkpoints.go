package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/metis-agent/metis/internal/message"
)

// schemaV9 records workspace checkpoints and forks
// (docs/conversation.md): a turn's checkpoint before its first change,
// its checkpoint after it ended and a summary of its changes (JSON;
// NULL until known), and where a forked session was made from. The
// turns of a session are listed by id (turn ids sort by creation).
const schemaV9 = `
ALTER TABLE turns ADD COLUMN checkpoint_id TEXT NOT NULL DEFAULT '';
ALTER TABLE turns ADD COLUMN after_checkpoint_id TEXT NOT NULL DEFAULT '';
ALTER TABLE turns ADD COLUMN changes TEXT;
ALTER TABLE sessions ADD COLUMN forked_from_session_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN forked_from_message_id TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS turns_session_id ON turns(session_id, id);
`

// TurnPage is one page of a session's turns, oldest first.
type TurnPage struct {
	Turns []Turn
	// Prompts holds each turn's first user message (by turn id), when
	// it has one.
	Prompts map[string]message.Message
	// HasMore reports older turns before the page.
	HasMore bool
}

// SessionTurns returns up to limit turns of a session before the turn
// id before ("" for the newest), oldest first, with their user
// messages. A before that is not a turn of the session yields an error
// wrapping ErrNotFound.
func (s *Store) SessionTurns(ctx context.Context, sessionID, before string, limit int) (TurnPage, error) {
	if err := s.readable(); err != nil {
		return TurnPage{}, err
	}
	if limit <= 0 {
		return TurnPage{}, fmt.Errorf("store: turns of %s: limit must be positive", sessionID)
	}
	query := "SELECT " + turnCols + " FROM turns WHERE session_id = ?"
	args := []any{sessionID}
	if before != "" {
		t, err := s.Turn(ctx, before)
		if err != nil || t.SessionID != sessionID {
			return TurnPage{}, fmt.Errorf("store: turns of %s before %q: %w", sessionID, before, ErrNotFound)
		}
		query += " AND id < ?"
		args = append(args, before)
	}
	query += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit+1)
	ts, err := s.queryTurns(ctx, query, args...)
	if err != nil {
		return TurnPage{}, fmt.Errorf("store: turns of %s: %w", sessionID, err)
	}
	p := TurnPage{Prompts: map[string]message.Message{}}
	if len(ts) > limit {
		ts, p.HasMore = ts[:limit], true
	}
	for i, j := 0, len(ts)-1; i < j; i, j = i+1, j-1 {
		ts[i], ts[j] = ts[j], ts[i]
	}
	p.Turns = ts
	if len(ts) == 0 {
		return p, nil
	}
	ids := make([]any, 0, len(ts)+1)
	ids = append(ids, sessionID)
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	msgs, err := s.queryMessages(ctx, "SELECT "+messageCols+" FROM messages WHERE session_id = ? AND role = 'user' AND turn_id IN (?"+
		strings.Repeat(", ?", len(ts)-1)+") ORDER BY seq", ids...)
	if err != nil {
		return TurnPage{}, fmt.Errorf("store: prompts of %s: %w", sessionID, err)
	}
	for _, m := range msgs {
		if _, ok := p.Prompts[m.TurnID]; !ok {
			p.Prompts[m.TurnID] = m
		}
	}
	return p, nil
}

// CheckpointIDs returns every checkpoint id a turn of any session
// records (collection keeps them).
func (s *Store) CheckpointIDs(ctx context.Context) (map[string]bool, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT checkpoint_id, after_checkpoint_id FROM turns WHERE checkpoint_id <> '' OR after_checkpoint_id <> ''")
	if err != nil {
		return nil, fmt.Errorf("store: checkpoint ids: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, fmt.Errorf("store: checkpoint ids: %w", err)
		}
		for _, id := range []string{a, b} {
			if id != "" {
				out[id] = true
			}
		}
	}
	return out, rows.Err()
}

// SessionToolCalls returns every tool call row of a session, oldest
// first (a fork copies them).
func (s *Store) SessionToolCalls(ctx context.Context, sessionID string) ([]ToolCall, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	cs, err := s.queryToolCalls(ctx, "SELECT "+toolCallCols+" FROM tool_calls WHERE session_id = ? ORDER BY created_at, rowid", sessionID)
	if err != nil {
		return nil, fmt.Errorf("store: tool calls of %s: %w", sessionID, err)
	}
	return cs, nil
}
