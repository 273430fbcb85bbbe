package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/metis-agent/metis/internal/store"
)

// Page is one page of the session listing, newest first.
type Page struct {
	Sessions []Summary
	Next     string // cursor of the next (older) page; "" on the last
}

// ListPage returns up to limit sessions, workers included, newest first,
// after the cursor before ("" for the first page). A cursor the server
// did not issue is ErrInvalid.
func (m *Manager) ListPage(ctx context.Context, before string, limit int) (Page, error) {
	p, err := m.cfg.Store.SessionsPage(ctx, before, limit)
	if errors.Is(err, store.ErrBadCursor) {
		return Page{}, fmt.Errorf("%w: before is not a cursor of this listing", ErrInvalid)
	}
	if err != nil {
		return Page{}, err
	}
	sums, err := m.summaries(ctx, p.Sessions)
	if err != nil {
		return Page{}, err
	}
	return Page{Sessions: sums, Next: p.Next}, nil
}
