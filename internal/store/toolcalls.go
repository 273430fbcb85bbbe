package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

const (
	sqlPutToolCall = `INSERT INTO tool_calls (id, session_id, turn_id, message_id, name, input, status,
	result, is_error, error_class, error_message, created_at, updated_at, approval_id, approval)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (session_id, message_id, id) DO UPDATE SET
	turn_id       = excluded.turn_id,
	name          = excluded.name,
	input         = excluded.input,
	status        = excluded.status,
	result        = excluded.result,
	is_error      = excluded.is_error,
	error_class   = excluded.error_class,
	error_message = excluded.error_message,
	created_at    = excluded.created_at,
	updated_at    = excluded.updated_at,
	approval_id   = excluded.approval_id,
	approval      = excluded.approval`

	toolCallCols = `id, session_id, turn_id, message_id, name, input, status,
result, is_error, error_class, error_message, created_at, updated_at, approval_id, approval`
)

func (t *txn) putToolCall(c *ToolCall) error {
	if c.ID == "" || c.SessionID == "" {
		return fmt.Errorf("store: put tool call %q: missing id or session id", c.ID)
	}
	if c.Status == "" {
		return fmt.Errorf("store: put tool call %s: empty status", c.ID)
	}
	var input sql.NullString
	if len(c.Input) > 0 {
		if !json.Valid(c.Input) {
			return fmt.Errorf("store: put tool call %s: input is not valid JSON", c.ID)
		}
		input = sql.NullString{String: string(c.Input), Valid: true}
	}
	approval := ""
	if c.Approval != nil {
		b, err := json.Marshal(c.Approval)
		if err != nil {
			return fmt.Errorf("store: put tool call %s: approval: %w", c.ID, err)
		}
		approval = string(b)
	}
	_, err := t.exec(stPutToolCall, c.ID, c.SessionID, c.TurnID, c.MessageID, c.Name, input,
		string(c.Status), c.Result, c.IsError, c.ErrorClass, c.ErrorMessage,
		nanos(c.CreatedAt), nanos(c.UpdatedAt), c.ApprovalID, approval)
	if err != nil {
		return fmt.Errorf("store: put tool call %s: %w", c.ID, err)
	}
	return nil
}

// ToolCall returns the tool call id (the model's tool_use id) of the
// assistant message messageID in a session, or an error wrapping
// ErrNotFound.
func (s *Store) ToolCall(ctx context.Context, sessionID, messageID, id string) (ToolCall, error) {
	if err := s.readable(); err != nil {
		return ToolCall{}, err
	}
	cs, err := s.queryToolCalls(ctx, "SELECT "+toolCallCols+
		" FROM tool_calls WHERE session_id = ? AND message_id = ? AND id = ?", sessionID, messageID, id)
	if err == nil && len(cs) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return ToolCall{}, fmt.Errorf("store: tool call %s of message %s: %w", id, messageID, err)
	}
	return cs[0], nil
}

// ToolCalls returns the tool calls of a turn in creation order (none for
// an unknown turn).
func (s *Store) ToolCalls(ctx context.Context, turnID string) ([]ToolCall, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	cs, err := s.queryToolCalls(ctx, "SELECT "+toolCallCols+
		" FROM tool_calls WHERE turn_id = ? ORDER BY created_at, rowid", turnID)
	if err != nil {
		return nil, fmt.Errorf("store: tool calls of turn %s: %w", turnID, err)
	}
	return cs, nil
}

// ToolCallByApproval returns the tool call that asked with approvalID,
// or an error wrapping ErrNotFound.
func (s *Store) ToolCallByApproval(ctx context.Context, approvalID string) (ToolCall, error) {
	if err := s.readable(); err != nil {
		return ToolCall{}, err
	}
	cs, err := s.queryToolCalls(ctx, "SELECT "+toolCallCols+
		" FROM tool_calls WHERE approval_id = ? AND approval_id <> '' LIMIT 1", approvalID)
	if err == nil && len(cs) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return ToolCall{}, fmt.Errorf("store: tool call of approval %s: %w", approvalID, err)
	}
	return cs[0], nil
}

// AwaitingApproval returns every tool call waiting for an answer, of
// every session, oldest first.
func (s *Store) AwaitingApproval(ctx context.Context) ([]ToolCall, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	cs, err := s.queryToolCalls(ctx, "SELECT "+toolCallCols+
		" FROM tool_calls WHERE status = 'awaiting_approval' ORDER BY created_at, rowid")
	if err != nil {
		return nil, fmt.Errorf("store: tool calls awaiting approval: %w", err)
	}
	return cs, nil
}

func (s *Store) queryToolCalls(ctx context.Context, query string, args ...any) ([]ToolCall, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ToolCall
	for rows.Next() {
		var (
			c                ToolCall
			input            []byte
			status, approval string
			created, updated int64
		)
		if err := rows.Scan(&c.ID, &c.SessionID, &c.TurnID, &c.MessageID, &c.Name, &input, &status,
			&c.Result, &c.IsError, &c.ErrorClass, &c.ErrorMessage, &created, &updated, &c.ApprovalID, &approval); err != nil {
			return nil, err
		}
		if approval != "" {
			var a Approval
			if json.Unmarshal([]byte(approval), &a) == nil {
				c.Approval = &a
			}
		}
		if input != nil {
			c.Input = json.RawMessage(input)
		}
		c.Status, c.CreatedAt, c.UpdatedAt = ToolStatus(status), fromNanos(created), fromNanos(updated)
		out = append(out, c)
	}
	return out, rows.Err()
}
