package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

func (m *Manager) defaultMode() permission.Mode {
	if m.cfg.DefaultMode != "" {
		return m.cfg.DefaultMode
	}
	return permission.ModeDefault
}

// SetMode changes a session's mode: session.mode_changed is committed
// with the row, the turn in flight follows at its next call, and so do
// the workers below the session whose turns are in flight (each gets its
// own session.mode_changed): a user who switches the session they watch
// to plan expects its workers to stop changing things too. The open
// requests those turns wait on are judged again in the new mode: one it
// runs is allowed, one it refuses (plan) is denied, each with reason
// user (the switch was the user's). The same mode again changes nothing.
func (m *Manager) SetMode(ctx context.Context, sessionID, mode string) (Summary, error) {
	md, err := permission.ParseMode(mode)
	if err != nil {
		return Summary{}, fmt.Errorf("%w: %v", ErrInvalidMode, err)
	}
	s, err := m.cfg.Store.Session(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return Summary{}, fmt.Errorf("%w: %s", ErrNotFound, sessionID)
	}
	if err != nil {
		return Summary{}, err
	}
	m.mu.Lock()
	closing := m.closing
	var followers []string // workers in flight below the session
	for sid, t := range m.turns {
		for _, p := range t.chain {
			if p == sessionID {
				followers = append(followers, sid)
				break
			}
		}
	}
	m.mu.Unlock()
	if closing {
		return Summary{}, ErrClosed
	}
	if err := m.changeMode(ctx, sessionID, modeOf(s), md, ""); err != nil {
		return Summary{}, err
	}
	for _, w := range followers {
		ws, err := m.cfg.Store.Session(ctx, w)
		if err != nil {
			return Summary{}, err
		}
		if err := m.changeMode(ctx, w, modeOf(ws), md, sessionID); err != nil {
			return Summary{}, err
		}
	}
	return m.Get(ctx, sessionID)
}

func modeOf(s store.Session) permission.Mode {
	if s.Mode == "" {
		return permission.ModeDefault
	}
	return permission.Mode(s.Mode)
}

// changeMode commits session.mode_changed for one session (unless the
// mode is already md), then moves its turn in flight to the new mode and
// judges its open requests again.
func (m *Manager) changeMode(ctx context.Context, sessionID string, prev, md permission.Mode, planner string) error {
	if prev == md {
		return nil
	}
	em, err := m.cfg.Bus.Emitter(ctx, sessionID)
	if err != nil {
		return err
	}
	actor := event.ActorUser
	if planner != "" {
		actor = event.ActorSession
	}
	if _, err := em.EmitWait(ctx, bus.Spec{Type: event.SessionModeChanged, Actor: actor,
		Payload: protocol.SessionModeChangedPayload{Mode: string(md), PreviousMode: string(prev), Planner: planner},
		Ops:     []store.Op{store.UpdateSession{ID: sessionID, Mode: string(md)}}}); err != nil {
		return fmt.Errorf("change the mode of %s: %w", sessionID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.turns[sessionID]
	if t == nil {
		return nil
	}
	t.mode = md
	if m.cfg.Policy == nil {
		return nil
	}
	for _, a := range t.approvals {
		if a.res != nil || a.req.Call == nil {
			continue
		}
		v := m.cfg.Policy.Decide(md, m.rules[t.root], a.req.Call)
		switch v.Action {
		case permission.Allow:
			m.settleLocked(a, protocol.ApprovalResolution{Decision: protocol.DecisionAllow, Reason: protocol.ApprovalReasonUser,
				Message: "the session switched to " + string(md) + " mode"})
		case permission.Deny:
			m.settleLocked(a, protocol.ApprovalResolution{Decision: protocol.DecisionDeny, Reason: protocol.ApprovalReasonUser,
				Message: "the session switched to " + string(md) + " mode: " + v.Reason})
		}
	}
	return nil
}
