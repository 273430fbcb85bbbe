package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Edit renames and archives a session (PATCH /sessions/{id} "title",
// "archived"); nil fields are left. An empty title is ErrInvalid. The
// change is committed with session.updated (the fields that changed,
// the title as stored), so every client and, in cluster mode, every
// node's store learns it; a field already as asked is left out, and
// nothing to change commits nothing.
func (m *Manager) Edit(ctx context.Context, sessionID string, e protocol.SessionEdit) (Summary, error) {
	var title string
	if e.Title != nil {
		if title = store.Title(*e.Title); title == "" {
			return Summary{}, fmt.Errorf("%w: the title is empty", ErrInvalid)
		}
	}
	s, err := m.session(ctx, sessionID)
	if err != nil {
		return Summary{}, err
	}
	var (
		ops []store.Op
		p   protocol.SessionEdit
	)
	if e.Title != nil && title != s.Title {
		ops = append(ops, store.Rename{SessionID: sessionID, Title: title})
		p.Title = &title
	}
	if e.Archived != nil && *e.Archived != s.Archived {
		ops = append(ops, store.SetArchived{SessionID: sessionID, Archived: *e.Archived})
		p.Archived = e.Archived
	}
	if len(ops) > 0 {
		em, err := m.cfg.Bus.Emitter(ctx, sessionID)
		if err != nil {
			return Summary{}, err
		}
		if _, err := em.EmitWait(ctx, bus.Spec{Type: event.SessionUpdated, Actor: event.ActorUser, Payload: p, Ops: ops}); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return Summary{}, fmt.Errorf("%w: %s", ErrNotFound, sessionID)
			}
			return Summary{}, fmt.Errorf("edit session %s: %w", sessionID, err)
		}
	}
	return m.Get(ctx, sessionID)
}

// Delete removes a session and every worker below it, with their
// events, messages, turns and tool calls (DELETE /sessions/{id}). It
// holds the session's turn slot while it deletes, so no turn or
// compaction starts meanwhile; a session with a turn in flight (its own
// or a worker's) is ErrTurnInFlight: cancel it first. With a Deleter
// (cluster mode) the deletion then reaches every node's store.
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
	gone := false
	del := func(ctx context.Context) error {
		_, err := m.cfg.Store.DeleteTree(ctx, sessionID)
		gone = err == nil
		return err
	}
	if m.cfg.Deleter != nil {
		err = m.cfg.Deleter.DeleteTree(ctx, sessionID, del)
	} else {
		err = del(ctx)
	}
	if gone {
		m.mu.Lock()
		delete(m.history, sessionID) // its workers' entries are unreachable now; the cache's cap evicts them
		m.mu.Unlock()
		// Their background commands stop now, not at the next retention
		// prune (background.go), even if the deletion could not reach
		// the cluster's other nodes.
		m.endBackground(ctx, tree, protocol.BackgroundSessionDeleted)
	}
	switch {
	case errors.Is(err, store.ErrBusy):
		return fmt.Errorf("%w: a worker of session %s is running", ErrTurnInFlight, sessionID)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %s", ErrNotFound, sessionID)
	case err != nil:
		return fmt.Errorf("delete session %s: %w", sessionID, err)
	}
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
