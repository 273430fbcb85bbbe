package store

import "github.com/metis-agent/metis/protocol"

// Summary is the session as clients see it (protocol.SessionSummary),
// with turnID the turn in flight ("" for none) and cancelling whether it
// is being cancelled.
func (s Session) Summary(turnID string, cancelling bool) protocol.SessionSummary {
	out := protocol.SessionSummary{ID: s.ID, WorkspacePath: s.WorkspacePath, ActiveModel: s.ActiveModel,
		RoutingPolicyVersion: s.RoutingPolicyVersion, CostSoFarUSD: s.CostUSD, TurnCount: s.TurnCount, CreatedAt: s.CreatedAt,
		Title: s.Title, LastActivityAt: s.LastActivityAt, ContextTokens: s.ContextTokens, ContextWindow: s.ContextWindow,
		MaxTurnCostUSD: s.MaxTurnCostUSD, MaxSessionCostUSD: s.MaxSessionCostUSD, QueuedTurns: s.Queued,
		Mode: modeOrDefault(s.Mode), PendingApprovals: []protocol.PendingApproval{}, SessionRules: append([]string{}, s.SessionRules...),
		Archived: s.Archived, BackgroundCommands: []protocol.BackgroundCommand{}}
	if s.ParentSessionID != "" {
		p := s.ParentSessionID
		out.ParentSessionID = &p
	}
	if s.ForkedFromSessionID != "" {
		out.ForkedFrom = &protocol.ForkedFrom{SessionID: s.ForkedFromSessionID, MessageID: s.ForkedFromMessageID}
	}
	if turnID != "" {
		id, st := turnID, protocol.TurnStatusInFlight
		if cancelling {
			st = protocol.TurnStatusCancelling
		}
		out.CurrentTurnID, out.CurrentTurnStatus = &id, &st
	}
	return out
}
