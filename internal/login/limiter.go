package login

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the attempts limit: LimitBurst attempts at once, then one
// every LimitEvery, per address; at most LimitAddresses addresses kept.
const (
	LimitBurst     = 10
	LimitEvery     = time.Second
	LimitAddresses = 4096
)

// Limiter limits attempts per key (a remote address, see AddressKey)
// with a token bucket: burst attempts at once, then one every interval.
// The table holds at most max keys: a new key in a full table first
// drops every bucket that is full again (the same as a key never seen),
// then, if none is, the one left alone longest. Safe for concurrent
// use.
type Limiter struct {
	burst float64
	every time.Duration
	max   int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

// NewLimiter returns a limiter; zero or negative arguments take the
// defaults (LimitBurst, LimitEvery, LimitAddresses, time.Now).
func NewLimiter(burst int, every time.Duration, max int, now func() time.Time) *Limiter {
	if burst <= 0 {
		burst = LimitBurst
	}
	if every <= 0 {
		every = LimitEvery
	}
	if max <= 0 {
		max = LimitAddresses
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{burst: float64(burst), every: every, max: max, now: now, buckets: map[string]*bucket{}}
}

// Take spends one attempt of key's. When none is left it spends nothing
// and says how long until one is.
func (l *Limiter) Take(key string) (ok bool, retryAfter time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(key, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) * float64(l.every))
}

// Refund gives back an attempt Take spent (the attempt succeeded: only
// failures count).
func (l *Limiter) Refund(key string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(key, now)
	b.tokens = min(l.burst, b.tokens+1)
}

// Len is the number of keys the table holds.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// bucketLocked returns key's bucket brought up to now, making one (and
// room for it) if needed.
func (l *Limiter) bucketLocked(key string, now time.Time) *bucket {
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			l.evictLocked(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
		return b
	}
	l.refill(b, now)
	return b
}

func (l *Limiter) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(l.burst, b.tokens+float64(d)/float64(l.every))
		b.at = now
	}
}

// evictLocked drops the buckets that are full again, or else the one
// untouched longest.
func (l *Limiter) evictLocked(now time.Time) {
	var oldest string
	var at time.Time
	for k, b := range l.buckets {
		if b.tokens+float64(now.Sub(b.at))/float64(l.every) >= l.burst {
			delete(l.buckets, k)
			continue
		}
		if oldest == "" || b.at.Before(at) {
			oldest, at = k, b.at
		}
	}
	if len(l.buckets) >= l.max && oldest != "" {
		delete(l.buckets, oldest)
	}
}

// AddressKey is the limiter key of a request's remote address
// (http.Request.RemoteAddr): its IP address, an IPv6 address by its /64
// (one host usually holds a whole /64), an IPv4-mapped address as IPv4.
// A remote address without an IP (a unix socket) is "local".
func AddressKey(remoteAddr string) string {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "local"
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
