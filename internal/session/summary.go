package session

import (
	"time"

	"github.com/metis-agent/metis/internal/store"
)

// Summary is a session as clients see it: the snapshot's session object
// (spec §3.4) plus parent_session_id and created_at (contract §3), and
// the fields a session list shows: title (from the first user message,
// "" before the first turn) and last_activity_at (the time of the
// session's newest catalog event; a worker's events count for the
// worker only, not for its planner).
type Summary struct {
	ID                   string    `json:"id"`
	ParentSessionID      *string   `json:"parent_session_id"`
	WorkspacePath        string    `json:"workspace_path"`
	ActiveModel          string    `json:"active_model"`
	RoutingPolicyVersion string    `json:"routing_policy_version"`
	CostSoFarUSD         float64   `json:"cost_so_far_usd"`
	TurnCount            int       `json:"turn_count"`
	CurrentTurnID        *string   `json:"current_turn_id"`
	CurrentTurnStatus    *string   `json:"current_turn_status"`
	CreatedAt            time.Time `json:"created_at"`
	Title                string    `json:"title"`
	LastActivityAt       time.Time `json:"last_activity_at"`
}

// Turn statuses reported in current_turn_status.
const (
	StatusInFlight   = "in_flight"
	StatusCancelling = "cancelling"
)

// NewSummary builds a summary from a session row and, if a turn is in
// flight, its id and whether it is being cancelled.
func NewSummary(s store.Session, turnID string, cancelling bool) Summary {
	out := Summary{ID: s.ID, WorkspacePath: s.WorkspacePath, ActiveModel: s.ActiveModel,
		RoutingPolicyVersion: s.RoutingPolicyVersion, CostSoFarUSD: s.CostUSD, TurnCount: s.TurnCount, CreatedAt: s.CreatedAt,
		Title: s.Title, LastActivityAt: s.LastActivityAt}
	if s.ParentSessionID != "" {
		p := s.ParentSessionID
		out.ParentSessionID = &p
	}
	if turnID != "" {
		id, st := turnID, StatusInFlight
		if cancelling {
			st = StatusCancelling
		}
		out.CurrentTurnID, out.CurrentTurnStatus = &id, &st
	}
	return out
}

func (m *Manager) summarize(s store.Session, t *activeTurn) Summary {
	s.RoutingPolicyVersion = m.cfg.Router.Version() // the policy in force now
	if t == nil {
		return NewSummary(s, "", false)
	}
	return NewSummary(s, t.id, t.cancelling)
}
