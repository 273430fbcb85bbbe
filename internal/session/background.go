package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// A session's background commands (shell with background: true; the
// server's tool.Background runs them, docs/tool-dispatcher.md) end with
// it: a delete stops those of the sessions it removes at once, and in
// cluster mode a node that loses a tree stops the tree's commands there
// while the node that takes the tree over reports their ends
// (tool.background_exited, reason owner_lost), so no client sees a
// command of a dead node as running for ever.

// treeSessions returns a session and every worker below it.
func (m *Manager) treeSessions(ctx context.Context, sessionID string) ([]string, error) {
	ids := []string{sessionID}
	for i := 0; i < len(ids) && i < maxTreeSessions; i++ {
		kids, err := m.cfg.Store.Children(ctx, ids[i])
		if err != nil {
			return ids, fmt.Errorf("sessions of tree %s: %w", sessionID, err)
		}
		for _, k := range kids {
			ids = append(ids, k.ID)
		}
	}
	return ids, nil
}

// maxTreeSessions bounds the sessions treeSessions walks.
const maxTreeSessions = 10_000

// endBackground stops the background commands of sessions for reason
// (nothing without Config.EndBackground); a failure is logged.
func (m *Manager) endBackground(ctx context.Context, sessions []string, reason string) {
	if m.cfg.EndBackground == nil {
		return
	}
	for _, sid := range sessions {
		if err := m.cfg.EndBackground(ctx, sid, reason); err != nil {
			m.cfg.Logger.Warn("stop a session's background commands", "session", sid, "reason", reason, "err", err)
		}
	}
}

// openBackground is a background command whose start the store holds
// and whose end it does not.
type openBackground struct {
	sessionID, turnID string
	started           protocol.ToolBackgroundStartedPayload
}

// openBackgroundOf returns the background commands of a tree that the
// store shows started and not ended.
func (m *Manager) openBackgroundOf(ctx context.Context, tree string) ([]openBackground, error) {
	ids, err := m.treeSessions(ctx, tree)
	if err != nil {
		return nil, err
	}
	evs, err := m.cfg.Store.Events(ctx, store.EventQuery{SessionIDs: ids,
		Types: []event.Type{event.ToolBackgroundStarted, event.ToolBackgroundExited}})
	if err != nil {
		return nil, fmt.Errorf("background commands of tree %s: %w", tree, err)
	}
	var open []openBackground
	for _, e := range evs {
		var p struct {
			BackgroundID string `json:"background_id"`
		}
		if json.Unmarshal(e.Payload, &p) != nil || p.BackgroundID == "" {
			continue
		}
		if e.Type == event.ToolBackgroundExited {
			open = slices.DeleteFunc(open, func(o openBackground) bool { return o.started.BackgroundID == p.BackgroundID })
			continue
		}
		var st protocol.ToolBackgroundStartedPayload
		if json.Unmarshal(e.Payload, &st) == nil {
			open = append(open, openBackground{sessionID: e.SessionID, turnID: e.TurnID, started: st})
		}
	}
	return open, nil
}

// HasOpenBackground reports whether the store shows a background
// command of a tree running that this manager does not run: in cluster
// mode, one its lost owner left (failover takes such a tree to report
// its end).
func (m *Manager) HasOpenBackground(ctx context.Context, tree string) (bool, error) {
	open, err := m.openBackgroundOf(ctx, tree)
	if err != nil {
		return false, err
	}
	for _, o := range open {
		if !m.runsBackground(o.sessionID, o.started.BackgroundID) {
			return true, nil
		}
	}
	return false, nil
}

// runsBackground reports whether this manager's server holds the
// background command id of a session.
func (m *Manager) runsBackground(sessionID, id string) bool {
	if m.cfg.Background == nil {
		return false
	}
	return slices.ContainsFunc(m.cfg.Background(sessionID), func(c protocol.BackgroundCommand) bool { return c.ID == id })
}

// endLostBackground emits tool.background_exited (reason owner_lost,
// exit code null) for every background command of a tree that the
// store shows running and this node does not run: they were processes
// of the tree's previous owner, which lost it (they stopped with it, or
// it stopped them when it lost the tree). It returns their ids.
func (m *Manager) endLostBackground(ctx context.Context, tree string) ([]string, error) {
	open, err := m.openBackgroundOf(ctx, tree)
	if err != nil {
		return nil, err
	}
	var ended []string
	for _, o := range open {
		if m.runsBackground(o.sessionID, o.started.BackgroundID) {
			continue
		}
		em, err := m.cfg.Bus.Emitter(ctx, o.sessionID)
		if err != nil {
			return ended, fmt.Errorf("end background command %s: %w", o.started.BackgroundID, err)
		}
		now := time.Now().UTC()
		p := protocol.ToolBackgroundExitedPayload{BackgroundID: o.started.BackgroundID, Command: o.started.Command,
			Reason: protocol.BackgroundOwnerLost, StartedAt: o.started.StartedAt, EndedAt: now,
			DurationMS: max(0, now.Sub(o.started.StartedAt).Milliseconds())}
		if _, err := em.EmitWait(ctx, bus.Spec{Type: event.ToolBackgroundExited, TurnID: o.turnID, Actor: event.ActorTool,
			Payload: p}); err != nil {
			return ended, fmt.Errorf("end background command %s: %w", o.started.BackgroundID, err)
		}
		ended = append(ended, o.started.BackgroundID)
	}
	return ended, nil
}
