package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Edit renames and archives a session (PATCH /sessions/{id} "title",
// "archived"); nil fields are left. An empty title is ErrInvalid.
func (m *Manager) Edit(ctx context.Context, sessionID string, e protocol.SessionEdit) (Summary, error) {
	var ops []store.Op
	if e.Title != nil {
		t := store.Title(*e.Title)
		if t == "" {
			return Summary{}, fmt.Errorf("%w: the title is empty", ErrInvalid)
		}
		ops = append(ops, store.Rename{SessionID: sessionID, Title: t})
	}
	if e.Archived != nil {
		ops = append(ops, store.SetArchived{SessionID: sessionID, Archived: *e.Archived})
	}
	if len(ops) > 0 {
		if err := m.cfg.Store.Apply(ctx, ops...); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return Summary{}, fmt.Errorf("%w: %s", ErrNotFound, sessionID)
			}
			return Summary{}, err
		}
	}
	return m.Get(ctx, sessionID)
}

// Delete removes a session and every worker below it, with their
// events, messages, turns and tool calls (DELETE /sessions/{id}). It
// holds the session's turn slot while it deletes, so no turn or
// compaction starts meanwhile; a session with a turn in flight (its own
// or a worker's) is ErrTurnInFlight: cancel it first.
func (m *Manager) Delete(ctx context.Context, sessionID string) error {
	if _, err := m.session(ctx, sessionID); err != nil {
		return err
	}
	t := &activeTurn{id: event.NewID("del_"), done: make(chan struct{})}
	if _, err := m.admit(ctx, sessionID, t, false); err != nil {
		return err
	}
	defer func() {
		m.mu.Lock()
		delete(m.turns, sessionID)
		m.mu.Unlock()
		close(t.done)
		m.wg.Done()
	}()
	tree, err := m.treeSessions(ctx, sessionID)
	if err != nil {
		return err
	}
	_, err = m.cfg.Store.DeleteTree(ctx, sessionID)
	switch {
	case errors.Is(err, store.ErrBusy):
		return fmt.Errorf("%w: a worker of session %s is running", ErrTurnInFlight, sessionID)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %s", ErrNotFound, sessionID)
	case err != nil:
		return err
	}
	m.mu.Lock()
	delete(m.history, sessionID) // its workers' entries are unreachable now; the cache's cap evicts them
	m.mu.Unlock()
	// Their background commands stop now, not at the next retention
	// prune (background.go).
	m.endBackground(ctx, tree, protocol.BackgroundSessionDeleted)
	return nil
}

// Models lists the models sessions can be created with (GET /models):
// the default first.
func (m *Manager) Models(ctx context.Context) protocol.ModelList {
	out := protocol.ModelList{Default: m.cfg.DefaultModel, Models: []protocol.ModelInfo{}, Unavailable: []protocol.UnavailableProvider{}}
	if m.cfg.Models == nil {
		return out
	}
	ids, unavailable := m.cfg.Models.Available(ctx)
	if out.Default != "" {
		ids = append([]string{out.Default}, ids...)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		p, _, _ := strings.Cut(id, ":")
		out.Models = append(out.Models, protocol.ModelInfo{ID: id, Provider: p})
	}
	for p, why := range unavailable {
		out.Unavailable = append(out.Unavailable, protocol.UnavailableProvider{Provider: p, Reason: why})
	}
	slices.SortFunc(out.Unavailable, func(a, b protocol.UnavailableProvider) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}
