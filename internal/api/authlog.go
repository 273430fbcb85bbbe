package api

import (
	"log/slog"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/login"
)

// DefaultRefusalLogEvery is how often at most the refused attempts to
// present the token are logged.
const DefaultRefusalLogEvery = time.Minute

// maxRefusalAddrs bounds the distinct addresses one summary counts.
const maxRefusalAddrs = 1000

// refusalLog turns refused attempts to present the token (a wrong token
// to POST /login or in an Authorization header, or an attempt refused by
// the limiter) into one log line at most every interval: the first
// refusal after a quiet interval is logged at once, and the ones that
// follow within the interval are counted and logged together when it
// ends. A flood of wrong logins costs a line a minute, not a line each.
type refusalLog struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	last    time.Time // when the last line was written
	first   time.Time // the first refusal counted since then
	wrong   int       // wrong tokens since then
	limited int       // attempts refused by the limiter since then
	addrs   map[string]struct{}
	remote  string // the last refused remote address
	timer   *time.Timer
	closed  bool
}

func newRefusalLog(log *slog.Logger, every time.Duration) *refusalLog {
	if every <= 0 {
		every = DefaultRefusalLogEvery
	}
	return &refusalLog{log: log, every: every, addrs: map[string]struct{}{}}
}

// add counts one refused attempt from remote (limited: the limiter
// refused it before the token was looked at).
func (l *refusalLog) add(remote string, limited bool) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrong == 0 && l.limited == 0 {
		l.first = now
	}
	if limited {
		l.limited++
	} else {
		l.wrong++
	}
	if len(l.addrs) < maxRefusalAddrs {
		l.addrs[login.AddressKey(remote)] = struct{}{}
	}
	l.remote = remote
	switch {
	case now.Sub(l.last) >= l.every || l.closed:
		l.flushLocked(now)
	case l.timer == nil:
		l.timer = time.AfterFunc(l.last.Add(l.every).Sub(now), l.flush)
	}
}

// flush logs what was counted since the last line (the timer's end of
// an interval).
func (l *refusalLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	l.flushLocked(time.Now())
}

// close logs what is still counted and stops the timer.
func (l *refusalLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.flushLocked(time.Now())
}

func (l *refusalLog) flushLocked(now time.Time) {
	if l.wrong == 0 && l.limited == 0 {
		return
	}
	l.log.Warn("refused attempts to present the token", "wrong_token", l.wrong, "rate_limited", l.limited,
		"addresses", len(l.addrs), "last_remote", l.remote, "within", now.Sub(l.first).Round(time.Second).String())
	l.last = now
	l.wrong, l.limited = 0, 0
	clear(l.addrs)
}
