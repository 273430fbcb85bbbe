package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/message"
)

// TestPutTurnKeepsCheckpoints: a turn row written without checkpoint
// fields (the terminal event's, crash recovery's) keeps those a
// workspace.checkpointed or workspace.changed stored.
func TestPutTurnKeepsCheckpoints(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	now := time.Now()
	row := Turn{ID: "turn_1", SessionID: "sess_1", Status: TurnInFlight, StartedAt: now}
	withCkpt := row
	withCkpt.CheckpointID = "ckpt_A"
	after := row
	after.AfterCheckpointID, after.Changes = "ckpt_B", json.RawMessage(`{"files":[],"files_changed":0,"additions":0,"deletions":0}`)
	done := row
	done.Status, done.EndedAt = TurnCompleted, now.Add(time.Second)
	for _, r := range []Turn{row, withCkpt, row, after, done} {
		if err := s.Apply(ctx, PutTurn{Turn: r}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Turn(ctx, "turn_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != TurnCompleted || got.CheckpointID != "ckpt_A" || got.AfterCheckpointID != "ckpt_B" || string(got.Changes) != string(after.Changes) {
		t.Fatalf("turn %+v", got)
	}
}

// TestSessionTurnsPages: turns come oldest first in pages before a
// cursor, each with its first user message.
func TestSessionTurnsPages(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	now := time.Now()
	var ops []Op
	for _, id := range []string{"turn_1", "turn_2", "turn_3"} {
		ops = append(ops, PutTurn{Turn: Turn{ID: id, SessionID: "sess_1", Status: TurnCompleted, StartedAt: now}},
			PutMessage{Message: message.Message{ID: "msg_" + id, SessionID: "sess_1", TurnID: id, Role: message.RoleUser,
				Content: []message.Block{message.Text("prompt of " + id)}, Status: message.StatusComplete, CreatedAt: now}})
	}
	ops = append(ops, PutTurn{Turn: Turn{ID: "turn_9", SessionID: "sess_other", Status: TurnCompleted, StartedAt: now}})
	if err := s.Apply(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	p, err := s.SessionTurns(ctx, "sess_1", "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Turns) != 2 || p.Turns[0].ID != "turn_2" || p.Turns[1].ID != "turn_3" || !p.HasMore {
		t.Fatalf("first page %+v", p)
	}
	if m := p.Prompts["turn_3"]; m.PlainText() != "prompt of turn_3" {
		t.Fatalf("prompt %+v", m)
	}
	p, err = s.SessionTurns(ctx, "sess_1", "turn_2", 2)
	if err != nil || len(p.Turns) != 1 || p.Turns[0].ID != "turn_1" || p.HasMore {
		t.Fatalf("second page %+v %v", p, err)
	}
	if _, err := s.SessionTurns(ctx, "sess_1", "turn_9", 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a cursor of another session = %v, want ErrNotFound", err)
	}
}

// TestForkedFromRoundTrips: a fork's origin is stored and summarised.
func TestForkedFromRoundTrips(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_f", CreatedAt: time.Now(),
		ForkedFromSessionID: "sess_a", ForkedFromMessageID: "msg_a"}}); err != nil {
		t.Fatal(err)
	}
	ss, err := s.Session(ctx, "sess_f")
	if err != nil {
		t.Fatal(err)
	}
	sum := ss.Summary("", false)
	if sum.ForkedFrom == nil || sum.ForkedFrom.SessionID != "sess_a" || sum.ForkedFrom.MessageID != "msg_a" {
		t.Fatalf("forked_from %+v", sum.ForkedFrom)
	}
}

// TestMigrateV7Checkpoints: a version 7 database gains the checkpoint
// and fork columns, empty for what it held.
func TestMigrateV7Checkpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v7.db")
	ctx := context.Background()
	db, err := sql.Open("sqlite", dsn(path, writerParams))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{schemaV1, schemaV2, schemaV3, schemaV4, schemaV5, schemaV6, schemaV7, "PRAGMA user_version = 7",
		`INSERT INTO sessions (id, created_at) VALUES ('sess_old', 10)`,
		`INSERT INTO turns (id, session_id, status, started_at) VALUES ('turn_old', 'sess_old', 'completed', 10)`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, Options{Path: path})
	tu, err := s.Turn(ctx, "turn_old")
	if err != nil || tu.CheckpointID != "" || tu.Changes != nil {
		t.Fatalf("migrated turn %+v %v", tu, err)
	}
	ss, err := s.Session(ctx, "sess_old")
	if err != nil || ss.ForkedFromSessionID != "" {
		t.Fatalf("migrated session %+v %v", ss, err)
	}
}
