// Package attach owns attach tokens (spec §3.1): short-lived, single-use
// nonces that the HTTP API hands out with GET /sessions/{id} and the
// streaming server redeems when a WebSocket connects. A token names the
// session it was issued for; redeeming it for any other session fails.
//
// attach imports only the standard library.
package attach

import (
	"crypto/rand"
	"encoding/base32"
	"sync"
	"time"
)

// Prefix starts every token.
const Prefix = "atk_"

// DefaultTTL is how long an unredeemed token stays valid.
const DefaultTTL = 2 * time.Minute

// maxOutstanding bounds unredeemed tokens; the oldest are forgotten first.
const maxOutstanding = 10000

// Registry issues and redeems tokens. It is safe for concurrent use.
type Registry struct {
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	tokens map[string]entry
	order  []string // issue order, for expiry sweeps
}

type entry struct {
	sessionID string
	expires   time.Time
}

// NewRegistry returns a registry whose tokens expire after ttl (0:
// DefaultTTL). now may be nil for time.Now.
func NewRegistry(ttl time.Duration, now func() time.Time) *Registry {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Registry{ttl: ttl, now: now, tokens: map[string]entry{}}
}

// Issue returns a fresh token for sessionID.
func (r *Registry) Issue(sessionID string) string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	tok := Prefix + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked()
	// The cap counts outstanding tokens, not order entries: order still
	// lists redeemed tokens behind an older unredeemed one.
	for len(r.tokens) >= maxOutstanding && len(r.order) > 0 {
		delete(r.tokens, r.order[0])
		r.order = r.order[1:]
	}
	if len(r.order) >= 2*maxOutstanding {
		r.compactLocked()
	}
	r.tokens[tok] = entry{sessionID: sessionID, expires: r.now().Add(r.ttl)}
	r.order = append(r.order, tok)
	return tok
}

// Redeem consumes a token for sessionID. It reports false for an
// unknown, expired, already used, or other-session token; a token is
// consumed by any redeem attempt that finds it.
func (r *Registry) Redeem(token, sessionID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.tokens[token]
	if !ok {
		return false
	}
	delete(r.tokens, token)
	return e.sessionID == sessionID && r.now().Before(e.expires)
}

func (r *Registry) sweepLocked() {
	now := r.now()
	n := 0
	for _, t := range r.order {
		e, ok := r.tokens[t]
		if !ok {
			n++
			continue
		}
		if now.Before(e.expires) {
			break
		}
		delete(r.tokens, t)
		n++
	}
	r.order = r.order[n:]
}

// compactLocked drops redeemed tokens from order, keeping issue order.
func (r *Registry) compactLocked() {
	live := make([]string, 0, len(r.tokens)+1)
	for _, t := range r.order {
		if _, ok := r.tokens[t]; ok {
			live = append(live, t)
		}
	}
	r.order = live
}
