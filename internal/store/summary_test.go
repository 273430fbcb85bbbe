package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
)

// TestSessionTitleAndActivity: SetTitle names a session once, and every
// appended event moves its session's last activity forward (never back)
// in the transaction that stores it, leaving other sessions alone.
func TestSessionTitleAndActivity(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	t0 := time.Unix(1700000000, 0).UTC()
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_a", CreatedAt: t0}},
		CreateSession{Session: Session{ID: "sess_b", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	ev := func(id string, at time.Time) *event.Event {
		e := &event.Event{ID: id, SessionID: "sess_a", Type: event.TurnStarted, TurnID: "turn_1",
			Actor: event.ActorUser, TS: at}
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
		return e
	}
	if err := s.Apply(ctx, AppendEvent{Event: ev("evt_1", t0.Add(time.Minute))},
		SetTitle{SessionID: "sess_a", Title: "  first\n question  "}); err != nil {
		t.Fatal(err)
	}
	check := func(id, title string, last time.Time) {
		t.Helper()
		ss, err := s.Session(ctx, id)
		if err != nil || ss.Title != title || !ss.LastActivityAt.Equal(last) {
			t.Fatalf("%s: title %q, last activity %v (%v); want %q, %v", id, ss.Title, ss.LastActivityAt, err, title, last)
		}
	}
	check("sess_a", "first question", t0.Add(time.Minute))
	check("sess_b", "", t0)

	// A later title is ignored; an older event does not move activity back.
	if err := s.Apply(ctx, AppendEvent{Event: ev("evt_2", t0.Add(3*time.Minute))},
		AppendEvent{Event: ev("evt_3", t0.Add(2*time.Minute))},
		SetTitle{SessionID: "sess_a", Title: "second"}); err != nil {
		t.Fatal(err)
	}
	check("sess_a", "first question", t0.Add(3*time.Minute))

	// A blank title leaves a session untitled, so a later one still names it.
	if err := s.Apply(ctx, SetTitle{SessionID: "sess_b", Title: " \n "}); err != nil {
		t.Fatal(err)
	}
	check("sess_b", "", t0)
	if err := s.Apply(ctx, SetTitle{SessionID: "sess_b", Title: "named"}); err != nil {
		t.Fatal(err)
	}
	check("sess_b", "named", t0)
}

// TestMigrateV3Summary: migrating a version 3 database adds title and
// last_activity_at and backfills them: the title from the first user
// message holding text, the last activity from the newest event, turn
// start or end, or else the creation time.
func TestMigrateV3Summary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v3.db")
	ctx := context.Background()
	db, err := sql.Open("sqlite", dsn(path, writerParams))
	if err != nil {
		t.Fatal(err)
	}
	user := func(text string) string {
		b, err := json.Marshal([]message.Block{message.Text(text)})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, q := range []string{schemaV1, schemaV2, schemaV3, "PRAGMA user_version = 3",
		// sess_e: events are the newest activity; its first user message is blank.
		// sess_t: a turn ended after its last (pruned) event.
		// sess_n: nothing but its creation.
		`INSERT INTO sessions (id, created_at) VALUES ('sess_e', 10), ('sess_t', 20), ('sess_n', 30)`,
		`INSERT INTO events (id, session_id, type, ts, actor, body) VALUES
			('evt_1', 'sess_e', 'turn.started', 100, 'user', '{}'),
			('evt_2', 'sess_e', 'turn.completed', 500, 'agent', '{}'),
			('evt_3', 'sess_t', 'turn.started', 200, 'user', '{}')`,
		`INSERT INTO turns (id, session_id, status, started_at, ended_at) VALUES
			('turn_1', 'sess_e', 'completed', 100, 400),
			('turn_2', 'sess_t', 'completed', 200, 900)`,
		`INSERT INTO messages (id, session_id, role, content, created_at) VALUES
			('msg_0', 'sess_e', 'user', '` + user(" \n ") + `', 100),
			('msg_1', 'sess_e', 'user', '` + user("Hello\n  world") + `', 101),
			('msg_2', 'sess_e', 'assistant', '` + user("not a title") + `', 102),
			('msg_3', 'sess_e', 'user', '` + user("later") + `', 103),
			('msg_4', 'sess_t', 'assistant', '` + user("assistant only") + `', 201)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openTest(t, Options{Path: path})
	for _, w := range []struct {
		id, title string
		last      int64
	}{{"sess_e", "Hello world", 500}, {"sess_t", "", 900}, {"sess_n", "", 30}} {
		ss, err := s.Session(ctx, w.id)
		if err != nil || ss.Title != w.title || nanos(ss.LastActivityAt) != w.last {
			t.Errorf("%s: title %q, last activity %d (%v); want %q, %d", w.id, ss.Title, nanos(ss.LastActivityAt), err, w.title, w.last)
		}
	}
}

// TestSummaryAsOf: a snapshot at an event before the first turn shows no
// title and that event's time; at the newest event, the row's values.
func TestSummaryAsOf(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	m := newMaker(t, "sess_a")
	created := m.next(event.SessionCreated)
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_a", CreatedAt: created.TS}}, AppendEvent{Event: created}); err != nil {
		t.Fatal(err)
	}
	started := m.next(event.TurnStarted)
	user := message.Message{ID: "msg_1", SessionID: "sess_a", Role: message.RoleUser, Content: []message.Block{message.Text("hi there")}}
	if err := s.Apply(ctx, AppendEvent{Event: started}, PutMessage{Message: user, EventID: started.ID},
		SetTitle{SessionID: "sess_a", Title: "hi there"}); err != nil {
		t.Fatal(err)
	}
	ended := m.next(event.TurnCompleted)
	if err := s.Apply(ctx, AppendEvent{Event: ended}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at    *event.Event
		title string
	}{{created, ""}, {started, "hi there"}, {ended, "hi there"}} {
		ss, err := s.SummaryAsOf(ctx, "sess_a", c.at.ID)
		if err != nil || ss.Title != c.title || !ss.LastActivityAt.Equal(c.at.TS) {
			t.Errorf("as of %s: title %q, last activity %v (%v); want %q, %v", c.at.Type, ss.Title, ss.LastActivityAt, err, c.title, c.at.TS)
		}
	}
	if _, err := s.SummaryAsOf(ctx, "sess_none", ended.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}
