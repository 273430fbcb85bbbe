package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/metis-agent/metis/internal/message"
)

// schemaVersion is the PRAGMA user_version this code writes and reads.
const schemaVersion = 10

// schemaV1 creates every table and index. Times are unix nanoseconds
// (0 for the zero time); JSON values are TEXT.
const schemaV1 = `
CREATE TABLE IF NOT EXISTS events (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT    NOT NULL,
	session_id TEXT    NOT NULL,
	type       TEXT    NOT NULL,
	turn_id    TEXT,
	ts         INTEGER NOT NULL,
	actor      TEXT    NOT NULL,
	body       BLOB    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_session_id ON events(session_id, id);
CREATE INDEX IF NOT EXISTS events_ts ON events(ts);

CREATE TABLE IF NOT EXISTS sessions (
	id                     TEXT    PRIMARY KEY,
	parent_session_id      TEXT    NOT NULL DEFAULT '',
	workspace_path         TEXT    NOT NULL DEFAULT '',
	active_model           TEXT    NOT NULL DEFAULT '',
	routing_policy_version TEXT    NOT NULL DEFAULT '',
	cost_usd               REAL    NOT NULL DEFAULT 0,
	turn_count             INTEGER NOT NULL DEFAULT 0,
	created_at             INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_created ON sessions(created_at);
CREATE INDEX IF NOT EXISTS sessions_parent ON sessions(parent_session_id, created_at)
	WHERE parent_session_id <> '';

CREATE TABLE IF NOT EXISTS turns (
	id         TEXT    PRIMARY KEY,
	session_id TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	reason     TEXT    NOT NULL DEFAULT '',
	started_at INTEGER NOT NULL,
	ended_at   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS turns_in_flight ON turns(started_at) WHERE status = 'in_flight';

CREATE TABLE IF NOT EXISTS messages (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT    NOT NULL UNIQUE,
	session_id TEXT    NOT NULL,
	turn_id    TEXT    NOT NULL DEFAULT '',
	role       TEXT    NOT NULL,
	content    TEXT    NOT NULL,
	status     TEXT    NOT NULL DEFAULT '',
	model      TEXT    NOT NULL DEFAULT '',
	usage      TEXT,
	created_at INTEGER NOT NULL,
	event_id   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS messages_session ON messages(session_id, seq);

CREATE TABLE IF NOT EXISTS tool_calls (
	id            TEXT    PRIMARY KEY,
	session_id    TEXT    NOT NULL,
	turn_id       TEXT    NOT NULL DEFAULT '',
	message_id    TEXT    NOT NULL DEFAULT '',
	name          TEXT    NOT NULL,
	input         TEXT,
	status        TEXT    NOT NULL,
	result        TEXT    NOT NULL DEFAULT '',
	is_error      INTEGER NOT NULL DEFAULT 0,
	error_class   TEXT    NOT NULL DEFAULT '',
	error_message TEXT    NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tool_calls_turn ON tool_calls(turn_id, created_at);

CREATE TABLE IF NOT EXISTS cursors (
	name TEXT    PRIMARY KEY,
	seq  INTEGER NOT NULL
) WITHOUT ROWID;
`

// schemaV2 indexes a session's delegate.* events, which snapshots fold
// into their workers list: a partial index, so appends of every other
// event pay nothing for it. Its WHERE term is repeated verbatim by
// sqlDelegations (SQLite uses a partial index only then).
const schemaV2 = `
CREATE INDEX IF NOT EXISTS events_delegate ON events(session_id, id) WHERE ` + delegateTerm + `;
`

const delegateTerm = `type IN ('delegate.started', 'delegate.completed', 'delegate.failed')`

// schemaV3 keys tool call rows by metis's own identity: the session, the
// assistant message holding the tool_use block (a metis id) and the
// tool_use id. Before, the provider's tool_use id alone was the key, so
// two sessions (or two turns of a server that sends no ids) sharing
// "call_1" overwrote each other's rows. SQLite cannot change a primary
// key in place: the table is rebuilt and every existing row copied (v2
// ids were unique, so none collide).
const schemaV3 = `
CREATE TABLE tool_calls_v3 (
	id            TEXT    NOT NULL,
	session_id    TEXT    NOT NULL,
	turn_id       TEXT    NOT NULL DEFAULT '',
	message_id    TEXT    NOT NULL DEFAULT '',
	name          TEXT    NOT NULL,
	input         TEXT,
	status        TEXT    NOT NULL,
	result        TEXT    NOT NULL DEFAULT '',
	is_error      INTEGER NOT NULL DEFAULT 0,
	error_class   TEXT    NOT NULL DEFAULT '',
	error_message TEXT    NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	PRIMARY KEY (session_id, message_id, id)
);
INSERT INTO tool_calls_v3 (id, session_id, turn_id, message_id, name, input, status, result, is_error,
	error_class, error_message, created_at, updated_at)
	SELECT id, session_id, turn_id, message_id, name, input, status, result, is_error,
	error_class, error_message, created_at, updated_at
	FROM tool_calls ORDER BY rowid;
DROP TABLE tool_calls;
ALTER TABLE tool_calls_v3 RENAME TO tool_calls;
CREATE INDEX tool_calls_turn ON tool_calls(turn_id, created_at);
`

// schemaV4 gives sessions the summary fields clients list them by:
// title (from the first user message, "" before it; see Title) and
// last_activity_at (unix nanoseconds of the session's newest catalog
// event). The columns are added, then last_activity_at is backfilled
// from the newest of the session's events, turn starts and ends, and
// creation; backfillTitles fills title.
const schemaV4 = `
ALTER TABLE sessions ADD COLUMN title TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN last_activity_at INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET last_activity_at = max(
	created_at,
	coalesce((SELECT max(ts) FROM events WHERE events.session_id = sessions.id), 0),
	coalesce((SELECT max(max(started_at, ended_at)) FROM turns WHERE turns.session_id = sessions.id), 0));
`

// schemaV6 gives sessions what long sessions show and enforce
// (docs/context.md): context_tokens and context_window (the size of the
// conversation the next model call sends and the model's window, both in
// tokens, updated with llm.call_started, llm.call_completed and
// context.compacted), and the session's cost limits in USD (0: none),
// set from the server's defaults at creation and changed by PATCH
// /sessions/{id}. Sessions stored before have no limits.
const schemaV6 = `
ALTER TABLE sessions ADD COLUMN context_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN context_window INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN max_turn_cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN max_session_cost_usd REAL NOT NULL DEFAULT 0;
`

// schemaV7 adds permissions (docs/permissions.md): each session's mode
// (existing sessions get the most careful, default) and the rules
// "allow for this session" answers added (a JSON array of rule texts),
// and each tool call's approval: the id of the request it waited on and
// how that was decided. The partial index finds the calls waiting for an
// answer (status awaiting_approval) and a call by its approval id.
const schemaV7 = `
ALTER TABLE sessions ADD COLUMN mode TEXT NOT NULL DEFAULT 'default';
ALTER TABLE sessions ADD COLUMN session_rules TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tool_calls ADD COLUMN approval_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN approval TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS tool_calls_approval ON tool_calls(approval_id) WHERE approval_id <> '';
CREATE INDEX IF NOT EXISTS tool_calls_awaiting ON tool_calls(session_id) WHERE status = 'awaiting_approval';
`

// backfillTitles sets each session's title from its first user message
// (in insertion order) holding text, as titles were derived then.
func backfillTitles(ctx context.Context, tx *sql.Tx) error {
	prompts, err := firstPrompts(ctx, tx)
	if err != nil {
		return err
	}
	for id, text := range prompts {
		if _, err := tx.ExecContext(ctx, "UPDATE sessions SET title = ? WHERE id = ?", Title(text), id); err != nil {
			return err
		}
	}
	return nil
}

// firstPrompts returns the text of each session's first user message
// (in insertion order) holding text, by session id.
func firstPrompts(ctx context.Context, tx *sql.Tx) (map[string]string, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT session_id, content FROM messages WHERE role = 'user' ORDER BY session_id, seq")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	prompts := map[string]string{}
	for rows.Next() {
		var id, content string
		if err := rows.Scan(&id, &content); err != nil {
			return nil, err
		}
		if _, ok := prompts[id]; ok {
			continue
		}
		var m message.Message
		if json.Unmarshal([]byte(content), &m.Content) != nil {
			continue // unreadable content names nothing
		}
		if Title(m.PlainText()) != "" {
			prompts[id] = m.PlainText()
		}
	}
	return prompts, rows.Err()
}

// migrate brings the schema to schemaVersion. It is idempotent and
// refuses a database written by a newer version.
func migrate(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("schema: read version: %w", err)
	}
	switch {
	case v == schemaVersion:
		return nil
	case v > schemaVersion:
		return fmt.Errorf("schema: database version %d is newer than supported version %d", v, schemaVersion)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("schema: begin: %w", err)
	}
	defer tx.Rollback()
	if v < 1 {
		if _, err := tx.ExecContext(ctx, schemaV1); err != nil {
			return fmt.Errorf("schema: create v1: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, schemaV2); err != nil {
		return fmt.Errorf("schema: migrate to v2: %w", err)
	}
	if v < 3 {
		if _, err := tx.ExecContext(ctx, schemaV3); err != nil {
			return fmt.Errorf("schema: migrate to v3: %w", err)
		}
	}
	if v < 4 {
		if _, err := tx.ExecContext(ctx, schemaV4); err != nil {
			return fmt.Errorf("schema: migrate to v4: %w", err)
		}
		if err := backfillTitles(ctx, tx); err != nil {
			return fmt.Errorf("schema: migrate to v4: titles: %w", err)
		}
	}
	if v < 5 {
		if _, err := tx.ExecContext(ctx, schemaV5); err != nil { // logins.go
			return fmt.Errorf("schema: migrate to v5: %w", err)
		}
	}
	if v < 6 {
		if _, err := tx.ExecContext(ctx, schemaV6); err != nil {
			return fmt.Errorf("schema: migrate to v6: %w", err)
		}
	}
	if v < 7 {
		if _, err := tx.ExecContext(ctx, schemaV7); err != nil {
			return fmt.Errorf("schema: migrate to v7: %w", err)
		}
	}
	if v < 8 {
		if _, err := tx.ExecContext(ctx, schemaV8); err != nil { // conversation.go
			return fmt.Errorf("schema: migrate to v8: %w", err)
		}
	}
	if v < 9 {
		if _, err := tx.ExecContext(ctx, schemaV9); err != nil { // checkpoints.go
			return fmt.Errorf("schema: migrate to v9: %w", err)
		}
	}
	if v < 10 {
		if err := cleanDerivedTitles(ctx, tx); err != nil { // prompt_title.go
			return fmt.Errorf("schema: migrate to v10: titles: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("schema: set version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("schema: commit: %w", err)
	}
	return nil
}

// nanos encodes t as unix nanoseconds, the zero time as 0.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos decodes nanos: 0 is the zero time, anything else a UTC time.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// nullString maps "" to SQL NULL.
func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}
