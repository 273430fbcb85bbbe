package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
)

// fixture writes a session's rows: the session, a completed turn with a
// tool call and a message, and n events stamped at, all older or newer
// than a cutoff as the test needs.
type fixture struct {
	t   *testing.T
	s   *Store
	ctx context.Context
	pad int // bytes of text in each message (default 1,200)
}

func (f fixture) session(id, parent string, created time.Time) {
	f.t.Helper()
	if err := f.s.Apply(f.ctx, CreateSession{Session: Session{ID: id, ParentSessionID: parent, CreatedAt: created}}); err != nil {
		f.t.Fatal(err)
	}
}

// turn writes a turn of the session with a tool call, a message and
// events stamped at; inFlight leaves the turn open.
func (f fixture) turn(session, turn string, at time.Time, events int, inFlight bool) {
	f.t.Helper()
	seq, err := event.NewSequencer("", func() time.Time { return at })
	if err != nil {
		f.t.Fatal(err)
	}
	tu := Turn{ID: turn, SessionID: session, Status: TurnCompleted, StartedAt: at, EndedAt: at}
	if inFlight {
		tu.Status, tu.EndedAt = TurnInFlight, time.Time{}
	}
	pad := f.pad
	if pad == 0 {
		pad = 1200
	}
	msg := message.Message{ID: "msg_" + turn, SessionID: session, TurnID: turn, Role: message.RoleUser,
		Content: []message.Block{message.Text(strings.Repeat("w", pad))}, Status: message.StatusComplete, CreatedAt: at}
	ops := []Op{PutTurn{Turn: tu}, PutMessage{Message: msg},
		PutToolCall{Call: ToolCall{ID: "tc_" + turn, SessionID: session, TurnID: turn, Name: "read_file", Status: ToolCompleted, CreatedAt: at, UpdatedAt: at}}}
	for i := range events {
		id, ts := seq.Next()
		ev := &event.Event{ID: id, Type: event.LLMCallCompleted, SessionID: session, TurnID: turn, TS: ts, Actor: event.ActorAgent, Payload: payload(i)}
		if err := ev.Seal(); err != nil {
			f.t.Fatal(err)
		}
		ops = append(ops, AppendEvent{Event: ev})
	}
	if err := f.s.Apply(f.ctx, ops...); err != nil {
		f.t.Fatal(err)
	}
}

// rows counts what the store holds of a session.
func (f fixture) rows(session string) (sessions, turns, messages, toolCalls, events int) {
	f.t.Helper()
	for _, q := range []struct {
		n     *int
		query string
	}{
		{&sessions, "SELECT COUNT(*) FROM sessions WHERE id = ?"},
		{&turns, "SELECT COUNT(*) FROM turns WHERE session_id = ?"},
		{&messages, "SELECT COUNT(*) FROM messages WHERE session_id = ?"},
		{&toolCalls, "SELECT COUNT(*) FROM tool_calls WHERE session_id = ?"},
		{&events, "SELECT COUNT(*) FROM events WHERE session_id = ?"},
	} {
		if err := f.s.rdb.QueryRowContext(f.ctx, q.query, session).Scan(q.n); err != nil {
			f.t.Fatal(err)
		}
	}
	return
}

// TestPruneRemovesIdleTrees: retention removes, whole, every delegation
// tree idle past the cutoff (no event left, no turn in flight), its
// workers and orphaned workers included; a live session loses only its
// old events, never its conversation; a quiet turn in flight and a tree
// with one live worker are kept whole.
func TestPruneRemovesIdleTrees(t *testing.T) {
	ctx := context.Background()
	f := fixture{t: t, s: openTest(t, Options{}), ctx: ctx}
	now := time.Now()
	old, cutoff := now.Add(-72*time.Hour), now.Add(-24*time.Hour)

	f.session("sess_idle", "", old) // idle planner with a worker below a worker
	f.turn("sess_idle", "turn_i", old, 3, false)
	f.session("sess_idle_w", "sess_idle", old)
	f.turn("sess_idle_w", "turn_iw", old, 3, false)
	f.session("sess_idle_ww", "sess_idle_w", old)
	f.turn("sess_idle_ww", "turn_iww", old, 2, false)
	f.session("sess_orphan", "sess_gone", old) // a worker whose planner is gone
	f.turn("sess_orphan", "turn_o", old, 1, false)

	f.session("sess_live", "", old) // old history, a turn today
	f.turn("sess_live", "turn_l1", old, 4, false)
	f.turn("sess_live", "turn_l2", now, 2, false)

	f.session("sess_quiet", "", old) // a turn in flight since long ago
	f.turn("sess_quiet", "turn_q", old, 2, true)

	f.session("sess_tree", "", old) // idle planner, worker active today
	f.turn("sess_tree", "turn_t", old, 2, false)
	f.session("sess_tree_w", "sess_tree", old)
	f.turn("sess_tree_w", "turn_tw", now, 1, false)

	f.session("sess_new", "", now) // created today, nothing yet

	r, err := f.s.Prune(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sessions != 4 || r.Events != 3+3+2+1+4+2+2 {
		t.Fatalf("Prune = %+v, want 4 sessions and 17 events", r)
	}
	for _, id := range []string{"sess_idle", "sess_idle_w", "sess_idle_ww", "sess_orphan"} {
		if s, tu, m, tc, e := f.rows(id); s+tu+m+tc+e != 0 {
			t.Errorf("%s: %d session, %d turns, %d messages, %d tool calls, %d events left", id, s, tu, m, tc, e)
		}
		if _, err := f.s.Session(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v", id, err)
		}
	}
	for id, want := range map[string][5]int{
		"sess_live":   {1, 2, 2, 2, 2}, // the old turn's rows stay, its events go
		"sess_quiet":  {1, 1, 1, 1, 0},
		"sess_tree":   {1, 1, 1, 1, 0},
		"sess_tree_w": {1, 1, 1, 1, 1},
		"sess_new":    {1, 0, 0, 0, 0},
	} {
		s, tu, m, tc, e := f.rows(id)
		if got := [5]int{s, tu, m, tc, e}; got != want {
			t.Errorf("%s: rows (sessions, turns, messages, tool calls, events) %v, want %v", id, got, want)
		}
	}
	msgs, _, err := f.s.Messages(ctx, "sess_live", "", 10)
	if err != nil || len(msgs) != 2 || msgs[0].ID != "msg_turn_l1" {
		t.Fatalf("the live session's conversation after Prune: %v, %v", msgIDs(msgs), err)
	}
	// A turn that starts before the removal commits keeps its tree: the
	// writer checks again.
	f.session("sess_late", "", old)
	op := &removeTreeOp{root: "sess_late", before: cutoff.UnixNano()}
	f.turn("sess_late", "turn_late", now, 1, true)
	if err := f.s.Apply(ctx, op); err != nil || op.removed {
		t.Fatalf("a tree that became busy was removed (%v)", err)
	}
	if err := f.s.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}

// fileSize is the database file's size once the WAL is folded in.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestPruneShrinksFile: after Prune removes most of a database (15 of
// 16 sessions, with their events and large messages), the file itself
// is smaller, and stays correct.
func TestPruneShrinksFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metis.db")
	s := openTest(t, Options{Path: path})
	f := fixture{t: t, s: s, ctx: ctx, pad: 64 << 10}
	now := time.Now()
	old := now.Add(-72 * time.Hour)
	for i := range 16 {
		id := fmt.Sprintf("sess_%03d", i)
		at := old
		if i == 0 {
			at = now
		}
		f.session(id, "", old)
		for k := range 4 {
			f.turn(id, fmt.Sprintf("turn_%03d_%d", i, k), at, 10, false)
		}
	}
	if _, err := s.Vacuum(ctx); err != nil { // fold the WAL in
		t.Fatal(err)
	}
	before := fileSize(t, path)
	r, err := s.Prune(ctx, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	after := fileSize(t, path)
	t.Logf("file %d → %d bytes (%+v)", before, after, r)
	if r.Sessions != 15 || r.FreedBytes <= 0 {
		t.Fatalf("Prune = %+v, want 15 sessions and bytes freed", r)
	}
	if after > before/4 {
		t.Fatalf("file %d bytes after pruning 15 of 16 sessions, was %d", after, before)
	}
	if _, tu, m, tc, e := f.rows("sess_000"); tu != 4 || m != 4 || tc != 4 || e != 40 {
		t.Fatalf("the live session lost rows: %d turns, %d messages, %d tool calls, %d events", tu, m, tc, e)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOpenConvertsToIncrementalVacuum: a database created without
// auto_vacuum (as before it was set) is converted once when opened, its
// rows intact; a new one has it from the start.
func TestOpenConvertsToIncrementalVacuum(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	legacy := filepath.Join(dir, "legacy.db")
	db, err := sql.Open("sqlite", legacy)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"PRAGMA journal_mode=WAL", schemaV1, schemaV2, "PRAGMA user_version = 2", // as written before schema v3
		"INSERT INTO sessions (id, created_at) VALUES ('sess_old', 1)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var mode int
	if err := db.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil || mode != 0 {
		t.Fatalf("legacy auto_vacuum = %d, %v", mode, err)
	}
	db.Close()

	for _, path := range []string{legacy, filepath.Join(dir, "new.db")} {
		s := openTest(t, Options{Path: path})
		if err := s.rdb.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil || mode != autoVacuumIncremental {
			t.Fatalf("%s: auto_vacuum = %d, %v after Open", path, mode, err)
		}
		if path == legacy {
			if _, err := s.Session(ctx, "sess_old"); err != nil {
				t.Fatalf("converted database lost a row: %v", err)
			}
		}
	}
}
