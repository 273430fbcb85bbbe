package cluster

import "context"

// ReadThrough exposes readThrough to the package's tests, which need a
// last sequence that is gone by the time the reader gets there (the
// race between asking the leader and reading, made deterministic).
func (l *Log) ReadThrough(ctx context.Context, filter string, last uint64, fn func(Entry) error) error {
	return l.readThrough(ctx, filter, 0, last, fn)
}
