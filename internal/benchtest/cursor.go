package benchtest

import (
	"context"
	"fmt"

	"github.com/metis-agent/metis/internal/store"
)

// Cursor finds the id after which exactly n events of a session are
// stored. Each call reads only what was appended since the last one (a
// replaying client's subscribe itself stores events), so that finding
// it costs the server next to nothing between measured replays.
type Cursor struct {
	st  *store.Store
	sid string
	ids []string
}

// NewCursor returns a cursor over session sid's events in st.
func NewCursor(st *store.Store, sid string) *Cursor { return &Cursor{st: st, sid: sid} }

// Since returns the id after which exactly n of the session's events
// are stored now; it fails if n or fewer are stored.
func (c *Cursor) Since(n int) (string, error) {
	q := store.EventQuery{SessionIDs: []string{c.sid}}
	if len(c.ids) > 0 {
		q.AfterID = c.ids[len(c.ids)-1]
	}
	err := c.st.ScanEvents(context.Background(), q, func(r store.EventRow) error {
		c.ids = append(c.ids, r.ID)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("scan session %s: %w", c.sid, err)
	}
	if len(c.ids) <= n {
		return "", fmt.Errorf("%d events stored, want more than %d", len(c.ids), n)
	}
	return c.ids[len(c.ids)-n-1], nil
}
