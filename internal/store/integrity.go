package store

import (
	"context"
	"fmt"
	"strings"
)

// IntegrityCheck runs SQLite's PRAGMA integrity_check over the whole
// database and returns an error listing the problems it reports, if
// any. It reads every page, so it takes time proportional to the
// database size; it does not block writers.
func (s *Store) IntegrityCheck(ctx context.Context) error {
	if err := s.readable(); err != nil {
		return err
	}
	rows, err := s.rdb.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("store: integrity check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("store: integrity check: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: integrity check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("store: integrity check failed: %s", strings.Join(problems, "; "))
	}
	return nil
}
