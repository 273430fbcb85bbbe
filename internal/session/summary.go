package session

import (
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Summary is a session as clients see it; its JSON shape is part of the
// wire vocabulary (protocol.SessionSummary).
type Summary = protocol.SessionSummary

// Turn statuses reported in current_turn_status.
const (
	StatusInFlight   = protocol.TurnStatusInFlight
	StatusCancelling = protocol.TurnStatusCancelling
)

// summarize builds a session's summary; m.mu is held (the queue is
// read).
func (m *Manager) summarize(s store.Session, t *activeTurn) Summary {
	s.RoutingPolicyVersion = m.cfg.Router.Version() // the policy in force now
	s.Queued = m.wireQueueLocked(s.ID)
	if t == nil {
		return s.Summary("", false)
	}
	return s.Summary(t.id, t.cancelling)
}
