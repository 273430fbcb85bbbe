package login

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/store"
)

// Lifetimes of a login session, and how many the server keeps.
const (
	// DefaultIdle ends a session that has not been used for this long.
	DefaultIdle = 7 * 24 * time.Hour
	// DefaultMax ends a session this long after the login, used or not.
	DefaultMax = 30 * 24 * time.Hour
	// DefaultMaxSessions bounds the sessions kept: past it, a login ends
	// the least recently used one.
	DefaultMaxSessions = 1000
	// touchEvery is how stale the last use recorded in the store may be:
	// a session used all the time costs a write an hour, not one per
	// request. After a restart its idle time counts from that record.
	touchEvery = time.Hour
)

// Store keeps the sessions across restarts; *store.Store is one.
type Store interface {
	Logins(ctx context.Context) ([]store.Login, error)
	PutLogin(ctx context.Context, l store.Login) error
	DeleteLogins(ctx context.Context, idHashes ...string) error
	TouchLogin(idHash string, seen time.Time)
}

// Options configure New; zero values take the defaults.
type Options struct {
	Idle        time.Duration
	Max         time.Duration
	MaxSessions int
	// Now is the clock (time.Now); tests set it.
	Now    func() time.Time
	Logger *slog.Logger
}

// Sessions are the login sessions of one server and one token. Safe for
// concurrent use.
type Sessions struct {
	st   Store // nil: kept in memory only
	tag  string
	opts Options

	mu     sync.Mutex
	byHash map[string]*entry
}

type entry struct {
	created, seen time.Time
	recorded      time.Time // the last use the store holds
}

// New returns the sessions of a server whose token is token, loaded
// from st (nil: none kept across restarts). Stored sessions made with
// another token, or expired, are deleted: changing the token logs every
// browser out.
func New(ctx context.Context, token string, st Store, o Options) (*Sessions, error) {
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.Max <= 0 {
		o.Max = DefaultMax
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Sessions{st: st, tag: TokenTag(token), opts: o, byHash: map[string]*entry{}}
	if st == nil {
		return s, nil
	}
	rows, err := st.Logins(ctx)
	if err != nil {
		return nil, fmt.Errorf("login sessions: %w", err)
	}
	now := o.Now()
	var drop []string
	otherToken := 0
	for _, r := range rows {
		e := &entry{created: r.CreatedAt, seen: r.LastSeenAt, recorded: r.LastSeenAt}
		switch {
		case r.TokenTag != s.tag:
			otherToken++
			drop = append(drop, r.IDHash)
		case s.expired(e, now):
			drop = append(drop, r.IDHash)
		default:
			s.byHash[r.IDHash] = e
		}
	}
	if len(drop) > 0 {
		if err := st.DeleteLogins(ctx, drop...); err != nil {
			return nil, fmt.Errorf("login sessions: %w", err)
		}
	}
	if otherToken > 0 {
		o.Logger.Info("the token changed: logged out every browser session made with the old one", "sessions", otherToken)
	}
	return s, nil
}

// TokenTag identifies a token in the store without revealing it: an
// HMAC of a fixed label keyed by the token, 16 bytes in hex.
func TokenTag(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("metis login sessions v1"))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// hashID is the key a session id is kept under.
func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func (s *Sessions) expired(e *entry, now time.Time) bool {
	return !now.Before(e.created.Add(s.opts.Max)) || !now.Before(e.seen.Add(s.opts.Idle))
}

// Create starts a session and returns its id (for the cookie) and how
// long the cookie should live (Max: the server ends it sooner when it is
// idle). It is stored before it is returned.
func (s *Sessions) Create(ctx context.Context) (id string, maxAge time.Duration, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", 0, fmt.Errorf("login session: random bytes: %w", err)
	}
	id = base64.RawURLEncoding.EncodeToString(b)
	h := hashID(id)
	now := s.opts.Now()

	s.mu.Lock()
	drop := s.makeRoomLocked(now)
	s.mu.Unlock()
	if s.st != nil {
		if len(drop) > 0 {
			if err := s.st.DeleteLogins(ctx, drop...); err != nil {
				s.opts.Logger.Warn("login sessions: delete ended sessions", "err", err)
			}
		}
		if err := s.st.PutLogin(ctx, store.Login{IDHash: h, TokenTag: s.tag, CreatedAt: now, LastSeenAt: now}); err != nil {
			return "", 0, fmt.Errorf("login session: %w", err)
		}
	}
	s.mu.Lock()
	s.byHash[h] = &entry{created: now, seen: now, recorded: now}
	s.mu.Unlock()
	return id, s.opts.Max, nil
}

// makeRoomLocked drops the expired sessions and, when the table is still
// full, the least recently used one; it returns their hashes.
func (s *Sessions) makeRoomLocked(now time.Time) []string {
	var drop []string
	for h, e := range s.byHash {
		if s.expired(e, now) {
			drop = append(drop, h)
			delete(s.byHash, h)
		}
	}
	for len(s.byHash) >= s.opts.MaxSessions {
		var oldest string
		var at time.Time
		for h, e := range s.byHash {
			if oldest == "" || e.seen.Before(at) {
				oldest, at = h, e.seen
			}
		}
		delete(s.byHash, oldest)
		drop = append(drop, oldest)
	}
	return drop
}

// Check reports whether id is a live session, and counts this as a use
// of it. An expired session is ended.
func (s *Sessions) Check(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	h := hashID(id)
	now := s.opts.Now()
	s.mu.Lock()
	e, ok := s.byHash[h]
	if !ok {
		s.mu.Unlock()
		return false
	}
	if s.expired(e, now) {
		delete(s.byHash, h)
		s.mu.Unlock()
		if s.st != nil {
			if err := s.st.DeleteLogins(ctx, h); err != nil {
				s.opts.Logger.Warn("login sessions: delete an expired session", "err", err)
			}
		}
		return false
	}
	if now.After(e.seen) {
		e.seen = now
	}
	record := s.st != nil && now.Sub(e.recorded) >= touchEvery
	if record {
		e.recorded = now
	}
	s.mu.Unlock()
	if record {
		s.st.TouchLogin(h, now)
	}
	return true
}

// Revoke ends the session id (logout); an unknown id is no error.
func (s *Sessions) Revoke(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	h := hashID(id)
	s.mu.Lock()
	_, ok := s.byHash[h]
	delete(s.byHash, h)
	s.mu.Unlock()
	if !ok || s.st == nil {
		return nil
	}
	if err := s.st.DeleteLogins(ctx, h); err != nil {
		return fmt.Errorf("login session: %w", err)
	}
	return nil
}

// Len is the number of sessions kept (expired ones not yet dropped
// included).
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byHash)
}
