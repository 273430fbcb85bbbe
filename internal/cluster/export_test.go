package cluster

import (
	"context"
	"time"
)

// ReadThrough exposes readThrough to the package's tests, which need a
// last sequence that is gone by the time the reader gets there (the
// race between asking the leader and reading, made deterministic).
func (l *Log) ReadThrough(ctx context.Context, filter string, last uint64, fn func(Entry) error) error {
	return l.readThrough(ctx, filter, 0, last, fn)
}

// AgeForTest makes the lease's last confirmed renewal look older by d,
// as a node that was paused for d (its monotonic clock moved on, no
// renewal ran) sees it.
func (l *Lease) AgeForTest(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewed = l.renewed.Add(-d)
}

// DecodeDeletion exposes decodeDeletion to the package's fuzz test.
var DecodeDeletion = decodeDeletion

// ListerWithTTL returns a copy of n whose List judges an announcement
// stale by ttl, as a directory whose bucket's TTL is ttl does when the
// server expires its keys late.
func (n *Nodes) ListerWithTTL(ttl time.Duration) *Nodes {
	c := *n
	c.cfg.TTL = ttl
	return &c
}
