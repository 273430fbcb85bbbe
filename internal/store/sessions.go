package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

const (
	sqlInsertSession = `INSERT INTO sessions
(id, parent_session_id, workspace_path, active_model, routing_policy_version, cost_usd, turn_count, created_at,
 title, last_activity_at, context_tokens, context_window, max_turn_cost_usd, max_session_cost_usd, mode, session_rules,
 forked_from_session_id, forked_from_message_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	sqlUpdateSession = `UPDATE sessions SET
active_model = CASE WHEN ?1 <> '' THEN ?1 ELSE active_model END,
routing_policy_version = CASE WHEN ?2 <> '' THEN ?2 ELSE routing_policy_version END,
mode = CASE WHEN ?4 <> '' THEN ?4 ELSE mode END,
session_rules = CASE WHEN ?5 <> '' THEN ?5 ELSE session_rules END
WHERE id = ?3`

	sqlAddUsage = `UPDATE sessions SET cost_usd = cost_usd + ?, turn_count = turn_count + ? WHERE id = ?`

	// sqlSetTitle names a session once: a titled session keeps its title.
	sqlSetTitle = `UPDATE sessions SET title = ?1 WHERE id = ?2 AND title = '' AND ?1 <> ''`

	// sqlTouchSession moves a session's last activity forward to an
	// event's time (never back: events of one batch may carry
	// timestamps out of order).
	sqlTouchSession = `UPDATE sessions SET last_activity_at = max(last_activity_at, ?1) WHERE id = ?2`

	// sqlSetContext records the size of a session's conversation and its
	// model's window (UpdateSession.Context).
	sqlSetContext = `UPDATE sessions SET context_tokens = ?1, context_window = ?2 WHERE id = ?3`

	// sqlSetBudget changes a session's cost limits; a NULL leaves one.
	sqlSetBudget = `UPDATE sessions SET
max_turn_cost_usd = coalesce(?1, max_turn_cost_usd),
max_session_cost_usd = coalesce(?2, max_session_cost_usd)
WHERE id = ?3`

	sessionCols = `id, parent_session_id, workspace_path, active_model, routing_policy_version,
cost_usd, turn_count, created_at, title, last_activity_at,
context_tokens, context_window, max_turn_cost_usd, max_session_cost_usd, mode, session_rules,
forked_from_session_id, forked_from_message_id, archived`
)

func (t *txn) createSession(ss *Session) error {
	if ss.ID == "" {
		return errors.New("store: create session: empty id")
	}
	rules, err := encodeRules(ss.SessionRules)
	if err != nil {
		return fmt.Errorf("store: create session %s: %w", ss.ID, err)
	}
	_, err = t.exec(stInsertSession, ss.ID, ss.ParentSessionID, ss.WorkspacePath, ss.ActiveModel,
		ss.RoutingPolicyVersion, ss.CostUSD, ss.TurnCount, nanos(ss.CreatedAt), Title(ss.Title),
		max(nanos(ss.CreatedAt), nanos(ss.LastActivityAt)), ss.ContextTokens, ss.ContextWindow,
		ss.MaxTurnCostUSD, ss.MaxSessionCostUSD, modeOrDefault(ss.Mode), rules,
		ss.ForkedFromSessionID, ss.ForkedFromMessageID)
	if err != nil {
		if isUnique(err) {
			err = fmt.Errorf("%w: %w", ErrDuplicate, err)
		}
		return fmt.Errorf("store: create session %s: %w", ss.ID, err)
	}
	return nil
}

func (t *txn) updateSession(u *UpdateSession) error {
	if u.ActiveModel == "" && u.RoutingPolicyVersion == "" && u.Mode == "" && len(u.AddRules) == 0 &&
		(u.Context != nil || u.Budget != nil) {
		return t.updateLongSession(u) // one statement for the context size of every model call
	}
	rules := ""
	if len(u.AddRules) > 0 {
		var cur string
		err := t.tx.QueryRow("SELECT session_rules FROM sessions WHERE id = ?", u.ID).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: update session %s: %w", u.ID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: update session %s: %w", u.ID, err)
		}
		merged := decodeRules(cur)
		for _, r := range u.AddRules {
			if !slices.Contains(merged, r) {
				merged = append(merged, r)
			}
		}
		if rules, err = encodeRules(merged); err != nil {
			return fmt.Errorf("store: update session %s: %w", u.ID, err)
		}
	}
	res, err := t.exec(stUpdateSession, u.ActiveModel, u.RoutingPolicyVersion, u.ID, u.Mode, rules)
	if err != nil {
		return fmt.Errorf("store: update session %s: %w", u.ID, err)
	}
	if err := mustAffect(res, "update session", u.ID); err != nil {
		return err
	}
	return t.updateLongSession(u)
}

// updateLongSession applies UpdateSession's context and budget fields;
// a missing session fails with ErrNotFound.
func (t *txn) updateLongSession(u *UpdateSession) error {
	if c := u.Context; c != nil {
		res, err := t.exec(stSetContext, c.Tokens, c.Window, u.ID)
		if err != nil {
			return fmt.Errorf("store: update session %s: context: %w", u.ID, err)
		}
		if err := mustAffect(res, "update session", u.ID); err != nil {
			return err
		}
	}
	if b := u.Budget; b != nil {
		res, err := t.exec(stSetBudget, nullFloat(b.MaxTurnCostUSD), nullFloat(b.MaxSessionCostUSD), u.ID)
		if err != nil {
			return fmt.Errorf("store: update session %s: budget: %w", u.ID, err)
		}
		if err := mustAffect(res, "update session", u.ID); err != nil {
			return err
		}
	}
	return nil
}

// nullFloat maps nil to SQL NULL.
func nullFloat(f *float64) sql.NullFloat64 {
	if f == nil {
		return sql.NullFloat64{}
	}
	return sql.NullFloat64{Float64: *f, Valid: true}
}

func (t *txn) addUsage(u *AddUsage) error {
	res, err := t.exec(stAddUsage, u.CostUSD, u.Turns, u.SessionID)
	if err != nil {
		return fmt.Errorf("store: add usage to session %s: %w", u.SessionID, err)
	}
	return mustAffect(res, "add usage to session", u.SessionID)
}

func (t *txn) setTitle(op *SetTitle) error {
	if _, err := t.exec(stSetTitle, PromptTitle(op.Title), op.SessionID); err != nil {
		return fmt.Errorf("store: set title of session %s: %w", op.SessionID, err)
	}
	return nil
}

// touchSession records activity at ts (unix nanoseconds) on session id;
// flushTouches writes it before the transaction commits.
func (t *txn) touchSession(id string, ts int64) error {
	if cur, ok := t.touched[id]; !ok || ts > cur {
		t.touched[id] = ts
	}
	return nil
}

// flushTouches moves each touched session's last activity forward, one
// UPDATE per session of the transaction. A session without a row is
// touched nothing.
func (t *txn) flushTouches() error {
	for id, ts := range t.touched {
		if _, err := t.exec(stTouchSession, ts, id); err != nil {
			return fmt.Errorf("store: touch session %s: %w", id, err)
		}
	}
	return nil
}

// Session returns the session row id, or an error wrapping ErrNotFound.
func (s *Store) Session(ctx context.Context, id string) (Session, error) {
	if err := s.readable(); err != nil {
		return Session{}, err
	}
	ss, err := scanSession(s.rdb.QueryRowContext(ctx, "SELECT "+sessionCols+" FROM sessions WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: session %s: %w", id, err)
	}
	return ss, nil
}

// Sessions returns every session, workers included, in creation order.
func (s *Store) Sessions(ctx context.Context) ([]Session, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	ss, err := s.querySessions(ctx, "SELECT "+sessionCols+" FROM sessions ORDER BY created_at, rowid")
	if err != nil {
		return nil, fmt.Errorf("store: sessions: %w", err)
	}
	return ss, nil
}

// ErrBadCursor is wrapped by SessionsPage for a cursor it did not issue.
var ErrBadCursor = errors.New("not a session page cursor")

// maxCursorID bounds the session id inside a page cursor.
const maxCursorID = 128

// SessionPage is one page of the session listing, newest first.
type SessionPage struct {
	Sessions []Session
	// Next is the cursor of the following (older) page, "" on the last.
	Next string
}

// SessionsPage returns up to limit sessions (workers included), newest
// first by creation time (then by id, descending), starting after the
// cursor before ("" for the newest). The cursor names a position, not a
// row, so it stays valid if that session is removed meanwhile. A
// malformed cursor yields an error wrapping ErrBadCursor.
func (s *Store) SessionsPage(ctx context.Context, before string, limit int) (SessionPage, error) {
	if err := s.readable(); err != nil {
		return SessionPage{}, err
	}
	if limit <= 0 {
		return SessionPage{}, errors.New("store: sessions page: limit must be positive")
	}
	query := "SELECT " + sessionCols + " FROM sessions"
	var args []any
	if before != "" {
		at, id, err := ParseSessionCursor(before)
		if err != nil {
			return SessionPage{}, fmt.Errorf("store: sessions page: %w", err)
		}
		query += " WHERE (created_at, id) < (?, ?)"
		args = append(args, at, id)
	}
	query += " ORDER BY created_at DESC, id DESC LIMIT ?"
	args = append(args, limit+1) // one more tells whether older ones exist
	ss, err := s.querySessions(ctx, query, args...)
	if err != nil {
		return SessionPage{}, fmt.Errorf("store: sessions page: %w", err)
	}
	var p SessionPage
	if len(ss) > limit {
		ss = ss[:limit]
		p.Next = sessionCursor(ss[limit-1])
	}
	p.Sessions = ss
	return p, nil
}

// sessionCursor is the position just after ss in the listing:
// "<created_at unix nanoseconds>:<session id>".
func sessionCursor(ss Session) string {
	return strconv.FormatInt(nanos(ss.CreatedAt), 10) + ":" + ss.ID
}

// ParseSessionCursor decodes a cursor issued by SessionsPage into the
// creation time (unix nanoseconds) and id it points after. Clients
// treat cursors as opaque; this decodes untrusted input.
func ParseSessionCursor(c string) (int64, string, error) {
	num, id, ok := strings.Cut(c, ":")
	if !ok || id == "" || len(id) > maxCursorID || num == "" || len(num) > 19 {
		return 0, "", fmt.Errorf("%w: %q", ErrBadCursor, c)
	}
	for _, r := range num {
		if r < '0' || r > '9' {
			return 0, "", fmt.Errorf("%w: %q", ErrBadCursor, c)
		}
	}
	at, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %q", ErrBadCursor, c)
	}
	return at, id, nil
}

// Children returns the worker sessions whose parent is parentID, in
// creation order (none for an unknown parent).
func (s *Store) Children(ctx context.Context, parentID string) ([]Session, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	if parentID == "" {
		return nil, nil
	}
	ss, err := s.querySessions(ctx, "SELECT "+sessionCols+
		" FROM sessions WHERE parent_session_id = ? AND parent_session_id <> '' ORDER BY created_at, rowid", parentID)
	if err != nil {
		return nil, fmt.Errorf("store: children of session %s: %w", parentID, err)
	}
	return ss, nil
}

func (s *Store) querySessions(ctx context.Context, query string, args ...any) ([]Session, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		ss, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, ss)
	}
	return out, rows.Err()
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanSession(r scanner) (Session, error) {
	var (
		ss               Session
		created, touched int64
		rules            string
		archived         int
	)
	err := r.Scan(&ss.ID, &ss.ParentSessionID, &ss.WorkspacePath, &ss.ActiveModel,
		&ss.RoutingPolicyVersion, &ss.CostUSD, &ss.TurnCount, &created, &ss.Title, &touched,
		&ss.ContextTokens, &ss.ContextWindow, &ss.MaxTurnCostUSD, &ss.MaxSessionCostUSD, &ss.Mode, &rules,
		&ss.ForkedFromSessionID, &ss.ForkedFromMessageID, &archived)
	ss.Archived = archived != 0
	ss.CreatedAt, ss.LastActivityAt = fromNanos(created), fromNanos(touched)
	ss.SessionRules = decodeRules(rules)
	return ss, err
}

// maxSessionRules bounds the rules one session keeps.
const maxSessionRules = 1000

// encodeRules encodes a session's rules as stored (a JSON array).
func encodeRules(rules []string) (string, error) {
	if len(rules) > maxSessionRules {
		return "", fmt.Errorf("more than %d session rules", maxSessionRules)
	}
	if rules == nil {
		rules = []string{}
	}
	b, err := json.Marshal(rules)
	return string(b), err
}

// decodeRules decodes stored rules; what does not decode is no rules.
func decodeRules(s string) []string {
	var out []string
	if json.Unmarshal([]byte(s), &out) != nil || len(out) == 0 {
		return nil
	}
	return out
}

// modeOrDefault is the mode stored for a new session: "" is default.
func modeOrDefault(m string) string {
	if m == "" {
		return "default"
	}
	return m
}

// TreeRoot returns the top session of id's delegation tree (id's own row
// for a session that is not a worker).
func (s *Store) TreeRoot(ctx context.Context, id string) (Session, error) {
	ss, err := s.Session(ctx, id)
	for depth := 0; err == nil && ss.ParentSessionID != ""; depth++ {
		if depth >= 64 {
			return Session{}, fmt.Errorf("store: tree of %s: delegation chain deeper than 64", id)
		}
		ss, err = s.Session(ctx, ss.ParentSessionID)
	}
	return ss, err
}
