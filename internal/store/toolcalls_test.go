package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestToolCallsKeyedByMetisIdentity: two sessions, and two messages of
// one session, may use the same provider tool_use id ("call_1"); each
// call keeps its own row.
func TestToolCallsKeyedByMetisIdentity(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0).UTC()
	rows := []ToolCall{
		{ID: "call_1", SessionID: "sess_a", TurnID: "turn_a", MessageID: "msg_a", Name: "read_file", Status: ToolRunning, CreatedAt: t0, UpdatedAt: t0},
		{ID: "call_1", SessionID: "sess_b", TurnID: "turn_b", MessageID: "msg_b", Name: "shell", Status: ToolPending, CreatedAt: t0, UpdatedAt: t0},
		{ID: "call_1", SessionID: "sess_a", TurnID: "turn_a2", MessageID: "msg_a2", Name: "list_dir", Status: ToolCompleted, CreatedAt: t0, UpdatedAt: t0},
	}
	for _, r := range rows {
		if err := s.Apply(ctx, PutToolCall{Call: r}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rows {
		got, err := s.ToolCall(ctx, r.SessionID, r.MessageID, r.ID)
		if err != nil || got.Name != r.Name || got.Status != r.Status || got.TurnID != r.TurnID {
			t.Fatalf("ToolCall(%s, %s, %s) = %+v, %v; want %+v", r.SessionID, r.MessageID, r.ID, got, err, r)
		}
		calls, err := s.ToolCalls(ctx, r.TurnID)
		if err != nil || len(calls) != 1 || calls[0].Name != r.Name {
			t.Fatalf("ToolCalls(%s) = %+v, %v", r.TurnID, calls, err)
		}
	}
	// An update of one row leaves the others alone.
	upd := rows[0]
	upd.Status, upd.ErrorClass = ToolCancelled, "cancelled"
	if err := s.Apply(ctx, PutToolCall{Call: upd}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ToolCall(ctx, "sess_b", "msg_b", "call_1"); got.Status != ToolPending {
		t.Fatalf("the other session's row changed: %+v", got)
	}
	if _, err := s.ToolCall(ctx, "sess_b", "msg_a", "call_1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a row of another session's message: %v", err)
	}
}

// TestMigrateV2ToolCalls: a version 2 database is migrated to version 3
// with every tool call row kept, and the new key works on it.
func TestMigrateV2ToolCalls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	ctx := context.Background()
	db, err := sql.Open("sqlite", dsn(path, writerParams))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{schemaV1, schemaV2, "PRAGMA user_version = 2",
		`INSERT INTO tool_calls (id, session_id, turn_id, message_id, name, input, status, created_at, updated_at)
		 VALUES ('call_1', 'sess_a', 'turn_a', 'msg_a', 'read_file', '{"path":"a"}', 'running', 1, 2),
		        ('call_2', 'sess_b', 'turn_b', '', 'shell', NULL, 'pending', 3, 4)`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openTest(t, Options{Path: path})
	var v int
	if err := s.rdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version %d (%v), want %d", v, err, schemaVersion)
	}
	c1, err := s.ToolCall(ctx, "sess_a", "msg_a", "call_1")
	if err != nil || c1.Name != "read_file" || string(c1.Input) != `{"path":"a"}` || c1.Status != ToolRunning || c1.TurnID != "turn_a" {
		t.Fatalf("migrated row 1: %+v, %v", c1, err)
	}
	c2, err := s.ToolCall(ctx, "sess_b", "", "call_2")
	if err != nil || c2.Name != "shell" || c2.Input != nil || c2.Status != ToolPending {
		t.Fatalf("migrated row 2: %+v, %v", c2, err)
	}
	// The same provider id in another session no longer overwrites.
	if err := s.Apply(ctx, PutToolCall{Call: ToolCall{ID: "call_1", SessionID: "sess_c", MessageID: "msg_c", Name: "x",
		Status: ToolPending}}); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.ToolCall(ctx, "sess_a", "msg_a", "call_1"); c.Name != "read_file" {
		t.Fatalf("row overwritten after migration: %+v", c)
	}
}
