package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Login is a browser login session (internal/login): a row per login,
// kept so that a session survives a restart of the server. The session
// id itself is never stored, only its hash: whoever reads the database
// cannot replay a login cookie.
type Login struct {
	// IDHash is the hex SHA-256 of the session id: the row's key.
	IDHash string
	// TokenTag identifies the bearer token the login was made with (a
	// keyed hash of it, never the token): a login made with another
	// token is void.
	TokenTag string
	// CreatedAt is when the browser logged in; LastSeenAt when the
	// session was last used, as last recorded (TouchLogin).
	CreatedAt  time.Time
	LastSeenAt time.Time
}

// schemaV5 holds the login sessions. WITHOUT ROWID: the key is the
// hash, and the rows are few and small.
const schemaV5 = `
CREATE TABLE IF NOT EXISTS logins (
	id_hash      TEXT    PRIMARY KEY,
	token_tag    TEXT    NOT NULL,
	created_at   INTEGER NOT NULL,
	last_seen_at INTEGER NOT NULL
) WITHOUT ROWID;
`

// Logins returns every stored login session, in no particular order.
func (s *Store) Logins(ctx context.Context) ([]Login, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT id_hash, token_tag, created_at, last_seen_at FROM logins")
	if err != nil {
		return nil, fmt.Errorf("store: logins: %w", err)
	}
	defer rows.Close()
	var out []Login
	for rows.Next() {
		var l Login
		var created, seen int64
		if err := rows.Scan(&l.IDHash, &l.TokenTag, &created, &seen); err != nil {
			return nil, fmt.Errorf("store: logins: %w", err)
		}
		l.CreatedAt, l.LastSeenAt = fromNanos(created), fromNanos(seen)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: logins: %w", err)
	}
	return out, nil
}

// PutLogin stores a login session (replacing a row with the same hash)
// and waits until it is committed.
func (s *Store) PutLogin(ctx context.Context, l Login) error {
	if l.IDHash == "" {
		return errors.New("store: put login: empty id hash")
	}
	return s.Apply(ctx, &putLoginOp{l})
}

// DeleteLogins removes the login sessions with these hashes (missing
// ones are no error) and waits until it is committed.
func (s *Store) DeleteLogins(ctx context.Context, idHashes ...string) error {
	if len(idHashes) == 0 {
		return nil
	}
	return s.Apply(ctx, &deleteLoginsOp{idHashes})
}

// TouchLogin records that a login session was used at seen, without
// waiting for the commit (a request should not wait on the disk for
// this); a failure is logged. It never moves LastSeenAt back.
func (s *Store) TouchLogin(idHash string, seen time.Time) {
	s.Submit([]Op{&touchLoginOp{idHash, nanos(seen)}}, func(err error) {
		if err != nil && !errors.Is(err, ErrClosed) {
			s.log.Warn("store: record a login's last use", "err", err)
		}
	})
}

type putLoginOp struct{ l Login }

func (*putLoginOp) isOp() {}

func (o *putLoginOp) apply(t *txn) error {
	_, err := t.tx.Exec(`INSERT INTO logins (id_hash, token_tag, created_at, last_seen_at) VALUES (?, ?, ?, ?)
ON CONFLICT (id_hash) DO UPDATE SET token_tag = excluded.token_tag, created_at = excluded.created_at, last_seen_at = excluded.last_seen_at`,
		o.l.IDHash, o.l.TokenTag, nanos(o.l.CreatedAt), nanos(o.l.LastSeenAt))
	if err != nil {
		return fmt.Errorf("store: put login: %w", err)
	}
	return nil
}

type deleteLoginsOp struct{ hashes []string }

func (*deleteLoginsOp) isOp() {}

func (o *deleteLoginsOp) apply(t *txn) error {
	for _, h := range o.hashes {
		if _, err := t.tx.Exec("DELETE FROM logins WHERE id_hash = ?", h); err != nil {
			return fmt.Errorf("store: delete login: %w", err)
		}
	}
	return nil
}

type touchLoginOp struct {
	hash string
	seen int64
}

func (*touchLoginOp) isOp() {}

func (o *touchLoginOp) apply(t *txn) error {
	if _, err := t.tx.Exec("UPDATE logins SET last_seen_at = max(last_seen_at, ?) WHERE id_hash = ?", o.seen, o.hash); err != nil {
		return fmt.Errorf("store: touch login: %w", err)
	}
	return nil
}
