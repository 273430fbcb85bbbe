package login

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tok = "the-token-0123456789-abcdefghijklmnop"

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// openStore opens a trace store at path, closed when the test ends
// (closing twice is fine).
func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{Path: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newSessions(t *testing.T, token string, st Store, c *clock, o Options) *Sessions {
	t.Helper()
	o.Now = c.Now
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := New(context.Background(), token, st, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSessionsAreRandomPerLogin: every login gets its own id of 43
// characters; none is another's, and each is checked on its own.
func TestSessionsAreRandomPerLogin(t *testing.T) {
	ctx := context.Background()
	s := newSessions(t, tok, nil, newClock(), Options{})
	seen := map[string]bool{}
	for range 50 {
		id, maxAge, err := s.Create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 43 || seen[id] || maxAge != DefaultMax {
			t.Fatalf("id %q (%d characters, seen before %v), max age %v", id, len(id), seen[id], maxAge)
		}
		seen[id] = true
	}
	for id := range seen {
		if !s.Check(ctx, id) {
			t.Fatalf("session %q refused", id)
		}
		if s.Check(ctx, id[:42]+"x") || s.Check(ctx, tok) || s.Check(ctx, "") {
			t.Fatal("a made-up session accepted")
		}
	}
}

// TestSessionRevokedByLogout: after Revoke the id is refused, also by
// the same sessions loaded again from the store (a restart).
func TestSessionRevokedByLogout(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metis.db")
	st := openStore(t, path)
	c := newClock()
	s := newSessions(t, tok, st, c, Options{})
	kept, _, _ := s.Create(ctx)
	gone, _, _ := s.Create(ctx)
	if err := s.Revoke(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if s.Check(ctx, gone) || !s.Check(ctx, kept) {
		t.Fatal("after logout: the revoked session is accepted, or the other one refused")
	}
	st.Close()
	s = newSessions(t, tok, openStore(t, path), c, Options{})
	if s.Check(ctx, gone) || !s.Check(ctx, kept) {
		t.Fatal("after a restart: the revoked session is accepted, or the other one refused")
	}
}

// TestSessionsSurviveARestartButNotATokenChange: the sessions are
// loaded from the store by a server with the same token; a server with
// another token drops them all, for good.
func TestSessionsSurviveARestartButNotATokenChange(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metis.db")
	st := openStore(t, path)
	c := newClock()
	id, _, _ := newSessions(t, tok, st, c, Options{}).Create(ctx)
	rows, _ := st.Logins(ctx)
	if len(rows) != 1 || strings.Contains(rows[0].IDHash, id) || rows[0].TokenTag == "" || strings.Contains(rows[0].TokenTag, tok) {
		t.Fatalf("stored rows %+v: want the id's hash and a tag, never the id or the token", rows)
	}
	st.Close()

	st = openStore(t, path)
	if !newSessions(t, tok, st, c, Options{}).Check(ctx, id) {
		t.Fatal("the session did not survive a restart")
	}
	if newSessions(t, "another-token-0123456789-abcdefghijk", st, c, Options{}).Check(ctx, id) {
		t.Fatal("a session of the old token is accepted with a new one")
	}
	if rows, _ := st.Logins(ctx); len(rows) != 0 {
		t.Fatalf("%d sessions of the old token left in the store", len(rows))
	}
	if newSessions(t, tok, st, c, Options{}).Check(ctx, id) {
		t.Fatal("the old token's session came back with the old token")
	}
}

// TestSessionExpiry: a session ends after Idle without use, and Max
// after the login however much it is used; both across a restart too.
func TestSessionExpiry(t *testing.T) {
	ctx := context.Background()
	const idle, max = 7 * 24 * time.Hour, 30 * 24 * time.Hour
	c := newClock()
	s := newSessions(t, tok, nil, c, Options{Idle: idle, Max: max})
	id, _, _ := s.Create(ctx)
	c.Add(idle - time.Minute)
	if !s.Check(ctx, id) {
		t.Fatal("refused before its idle time")
	}
	c.Add(idle - time.Minute) // used a minute ago: the idle time slides
	if !s.Check(ctx, id) {
		t.Fatal("refused although it was used within its idle time")
	}
	c.Add(idle)
	if s.Check(ctx, id) {
		t.Fatal("accepted after a week without use")
	}
	if s.Len() != 0 {
		t.Fatal("the expired session was kept")
	}

	// Max: used every day, it still ends 30 days after the login.
	id, _, _ = s.Create(ctx)
	for day := 1; day < 30; day++ {
		c.Add(24 * time.Hour)
		if !s.Check(ctx, id) {
			t.Fatalf("refused on day %d", day)
		}
	}
	c.Add(24 * time.Hour)
	if s.Check(ctx, id) {
		t.Fatal("accepted 30 days after the login")
	}

	// Across a restart, the last use recorded counts (recorded at most
	// an hour late).
	path := filepath.Join(t.TempDir(), "metis.db")
	st := openStore(t, path)
	s = newSessions(t, tok, st, c, Options{Idle: idle, Max: max})
	id, _, _ = s.Create(ctx)
	c.Add(5 * 24 * time.Hour)
	s.Check(ctx, id) // recorded: more than an hour since the last record
	st.Close()
	c.Add(5 * 24 * time.Hour)
	st = openStore(t, path)
	if !newSessions(t, tok, st, c, Options{Idle: idle, Max: max}).Check(ctx, id) {
		t.Fatal("a session used 5 days ago was dropped at a restart")
	}
	c.Add(idle + time.Hour)
	s = newSessions(t, tok, st, c, Options{Idle: idle, Max: max})
	if s.Check(ctx, id) {
		t.Fatal("a session idle past its time was kept at a restart")
	}
	if rows, _ := st.Logins(ctx); len(rows) != 0 {
		t.Fatalf("expired sessions left in the store: %+v", rows)
	}
}

// TestSessionsAreBounded: past MaxSessions a login ends the least
// recently used session.
func TestSessionsAreBounded(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := newSessions(t, tok, nil, c, Options{MaxSessions: 3})
	var ids []string
	for range 3 {
		id, _, _ := s.Create(ctx)
		ids = append(ids, id)
		c.Add(time.Minute)
	}
	s.Check(ctx, ids[0]) // the first is now the most recently used
	c.Add(time.Minute)
	if _, _, err := s.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 || !s.Check(ctx, ids[0]) || s.Check(ctx, ids[1]) || !s.Check(ctx, ids[2]) {
		t.Fatalf("%d sessions; want the least recently used (the second) ended", s.Len())
	}
}

// TestTokenTag: the tag is fixed per token, differs between tokens, and
// does not contain the token.
func TestTokenTag(t *testing.T) {
	a, b := TokenTag(tok), TokenTag(tok+"x")
	if a != TokenTag(tok) || a == b || len(a) != 32 || strings.Contains(a, tok) {
		t.Fatalf("tags %q %q", a, b)
	}
}
