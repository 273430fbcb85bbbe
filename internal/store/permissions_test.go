package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestMigrateV4Permissions: a database of schema v4 gets every session
// in the default mode, with no session rules, and tool calls with no
// approval.
func TestMigrateV4Permissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v4.db")
	ctx := context.Background()
	db, err := sql.Open("sqlite", dsn(path, writerParams))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{schemaV1, schemaV2, schemaV3, schemaV4, "PRAGMA user_version = 4",
		`INSERT INTO sessions (id, created_at) VALUES ('sess_a', 10)`,
		`INSERT INTO tool_calls (id, session_id, turn_id, message_id, name, status, created_at, updated_at)
			VALUES ('call_1', 'sess_a', 'turn_1', 'msg_1', 'shell', 'completed', 1, 2)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, Options{Path: path})
	ss, err := s.Session(ctx, "sess_a")
	if err != nil || ss.Mode != "default" || ss.SessionRules != nil {
		t.Fatalf("session after migration: mode %q, rules %q (%v)", ss.Mode, ss.SessionRules, err)
	}
	cs, err := s.ToolCalls(ctx, "turn_1")
	if err != nil || len(cs) != 1 || cs[0].ApprovalID != "" || cs[0].Approval != nil {
		t.Fatalf("tool call after migration: %+v (%v)", cs, err)
	}
}

// TestSessionModeAndRules: UpdateSession sets the mode and adds rules,
// each once, in order; the summary carries both.
func TestSessionModeAndRules(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	now := time.Now()
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_a", CreatedAt: now, Mode: "plan"}},
		CreateSession{Session: Session{ID: "sess_w", ParentSessionID: "sess_a", CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, UpdateSession{ID: "sess_a", Mode: "auto", AddRules: []string{"shell(go test *)", "edit(docs/**)"}},
		UpdateSession{ID: "sess_a", AddRules: []string{"edit(docs/**)", "shell(ls *)"}}); err != nil {
		t.Fatal(err)
	}
	ss, err := s.Session(ctx, "sess_a")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"shell(go test *)", "edit(docs/**)", "shell(ls *)"}; ss.Mode != "auto" || !slices.Equal(ss.SessionRules, want) {
		t.Fatalf("mode %q, rules %q; want auto, %q", ss.Mode, ss.SessionRules, want)
	}
	sum := ss.Summary("", false)
	if sum.Mode != "auto" || len(sum.SessionRules) != 3 || sum.PendingApprovals == nil {
		t.Fatalf("summary: %+v", sum)
	}
	if w, _ := s.Session(ctx, "sess_w"); w.Summary("", false).Mode != "default" {
		t.Fatalf("a session created without a mode has mode %q", w.Mode)
	}
	if root, err := s.TreeRoot(ctx, "sess_w"); err != nil || root.ID != "sess_a" {
		t.Fatalf("tree root of the worker: %s (%v)", root.ID, err)
	}
	if err := s.Apply(ctx, UpdateSession{ID: "sess_none", AddRules: []string{"x"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rules of an unknown session: %v", err)
	}
}

// TestToolCallApproval: a call's approval is stored with it, found by
// its id, and listed while it waits.
func TestToolCallApproval(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	now := time.Now()
	c := ToolCall{ID: "call_1", SessionID: "sess_a", TurnID: "turn_1", MessageID: "msg_1", Name: "shell",
		Input: []byte(`{"command":"ls"}`), Status: ToolAwaitingApproval, ApprovalID: "apr_1", CreatedAt: now, UpdatedAt: now}
	if err := s.Apply(ctx, PutToolCall{Call: c}); err != nil {
		t.Fatal(err)
	}
	waiting, err := s.AwaitingApproval(ctx)
	if err != nil || len(waiting) != 1 || waiting[0].ApprovalID != "apr_1" {
		t.Fatalf("awaiting: %+v (%v)", waiting, err)
	}
	c.Status, c.Approval = ToolPending, &Approval{Decision: "deny", Reason: "user", Message: "no"}
	if err := s.Apply(ctx, PutToolCall{Call: c}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ToolCallByApproval(ctx, "apr_1")
	if err != nil || got.Approval == nil || got.Approval.Decision != "deny" || got.Approval.Message != "no" {
		t.Fatalf("by approval: %+v (%v)", got, err)
	}
	if waiting, _ := s.AwaitingApproval(ctx); len(waiting) != 0 {
		t.Fatalf("still awaiting: %+v", waiting)
	}
	if _, err := s.ToolCallByApproval(ctx, "apr_none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown approval: %v", err)
	}
	if _, err := s.ToolCallByApproval(ctx, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty approval id: %v", err)
	}
}
