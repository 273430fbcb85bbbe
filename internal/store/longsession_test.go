package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/message"
)

// TestMigrateV4LongSessions: a version 4 database gains the context and
// budget columns, zero for the sessions it held (no limits).
func TestMigrateV4LongSessions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v4.db")
	ctx := context.Background()
	db, err := sql.Open("sqlite", dsn(path, writerParams))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{schemaV1, schemaV2, schemaV3, schemaV4, "PRAGMA user_version = 4",
		`INSERT INTO sessions (id, created_at, title) VALUES ('sess_old', 10, 'old')`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, Options{Path: path})
	ss, err := s.Session(ctx, "sess_old")
	if err != nil || ss.Title != "old" || ss.ContextTokens != 0 || ss.ContextWindow != 0 || ss.MaxTurnCostUSD != 0 || ss.MaxSessionCostUSD != 0 {
		t.Fatalf("migrated session %+v %v", ss, err)
	}
}

// TestSessionContextAndBudget: a session is created with its window and
// limits; UpdateSession sets its context size, and changes one limit
// while leaving the other; the summary shows them.
func TestSessionContextAndBudget(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_c", CreatedAt: time.Now(), ContextWindow: 200000,
		MaxTurnCostUSD: 5, MaxSessionCostUSD: 50}}); err != nil {
		t.Fatal(err)
	}
	ten := 10.0
	if err := s.Apply(ctx, UpdateSession{ID: "sess_c", Context: &ContextSize{Tokens: 1234, Window: 100000}},
		UpdateSession{ID: "sess_c", Budget: &Budget{MaxSessionCostUSD: &ten}}); err != nil {
		t.Fatal(err)
	}
	ss, err := s.Session(ctx, "sess_c")
	if err != nil {
		t.Fatal(err)
	}
	sum := ss.Summary("", false)
	if sum.ContextTokens != 1234 || sum.ContextWindow != 100000 || sum.MaxTurnCostUSD != 5 || sum.MaxSessionCostUSD != 10 {
		t.Fatalf("summary %+v", sum)
	}
	if err := s.Apply(ctx, UpdateSession{ID: "sess_none", Budget: &Budget{MaxSessionCostUSD: &ten}}); err == nil {
		t.Fatal("a missing session was updated")
	}
}

// TestCompactionBlockRoundTrip: a compaction message is stored and read
// back with its block intact.
func TestCompactionBlockRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	c := &message.Compaction{Summary: "s", CompactedThrough: "msg_1", StubbedThrough: "msg_2", Trigger: "auto", Method: "summary",
		TokensBefore: 9000, TokensAfter: 3000}
	m := message.Message{ID: "msg_c", SessionID: "sess_c", Role: message.RoleUser, Status: message.StatusComplete,
		Content: []message.Block{{Type: message.BlockCompaction, Compaction: c}}}
	if err := s.Apply(ctx, PutMessage{Message: m}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Message(ctx, "msg_c")
	if err != nil || len(got.Content) != 1 || got.Content[0].Compaction == nil || *got.Content[0].Compaction != *c {
		t.Fatalf("read back %+v %v", got, err)
	}
}
