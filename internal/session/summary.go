package session

import (
	"context"
	"encoding/json"
	"slices"

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
// read). The queue is this manager's, unless remote lists the queues of
// sessions another server runs (summaries).
func (m *Manager) summarize(s store.Session, t *activeTurn, remote map[string][]protocol.QueuedTurn) Summary {
	s.RoutingPolicyVersion = m.cfg.Router.Version() // the policy in force now
	if q, ok := remote[s.ID]; ok {
		s.Queued = q
	} else {
		s.Queued = m.wireQueueLocked(s.ID)
	}
	var out Summary
	if t == nil {
		out = s.Summary("", false)
	} else {
		out = s.Summary(t.id, t.cancelling)
	}
	if m.cfg.Background != nil {
		out.BackgroundCommands = m.cfg.Background(s.ID)
	}
	return out
}

// summaries returns the summaries of sessions: the rows, the turns in
// flight, the approval requests waiting (a planner's include its
// workers'), and the session rules in force (a worker's are its tree's
// top session's). Waiting requests are read from the store, so every
// server of a cluster lists them; the ones this manager holds are told
// in full. So is the queue of a session another server runs (Config.Runs).
func (m *Manager) summaries(ctx context.Context, ss []store.Session) ([]Summary, error) {
	waiting, err := m.cfg.Store.AwaitingApproval(ctx)
	if err != nil {
		return nil, err
	}
	remote, err := m.remoteQueues(ctx, ss)
	if err != nil {
		return nil, err
	}
	chains := map[string][]string{} // session of a waiting call → its planners
	for _, c := range waiting {
		if _, ok := chains[c.SessionID]; !ok {
			if chains[c.SessionID], err = m.chainOf(ctx, c.SessionID); err != nil {
				return nil, err
			}
		}
	}
	rootRules := map[string][]string{} // planner of a worker → its tree's rules
	for _, s := range ss {
		if s.ParentSessionID == "" {
			continue
		}
		if _, ok := rootRules[s.ParentSessionID]; !ok {
			root, err := m.cfg.Store.TreeRoot(ctx, s.ParentSessionID)
			if err != nil {
				return nil, err
			}
			rootRules[s.ParentSessionID] = root.SessionRules
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Summary, len(ss))
	for i, s := range ss {
		if s.ParentSessionID != "" {
			s.SessionRules = rootRules[s.ParentSessionID]
		}
		out[i] = m.summarize(s, m.turns[s.ID], remote)
		for _, c := range waiting {
			if c.SessionID == s.ID || slices.Contains(chains[c.SessionID], s.ID) {
				out[i].PendingApprovals = append(out[i].PendingApprovals, m.pendingLocked(c))
			}
		}
	}
	return out, nil
}

// remoteQueues returns the queues of the sessions of ss that another
// server runs (Config.Runs), as the store holds them: the turns queued
// and not yet started or cancelled, in queue order (never nil for such
// a session). Only the server that runs a session holds its queue in
// memory; the store's rows are the same turns, committed with their
// turn.queued, so every server of a cluster answers alike.
func (m *Manager) remoteQueues(ctx context.Context, ss []store.Session) (map[string][]protocol.QueuedTurn, error) {
	if m.cfg.Runs == nil {
		return nil, nil
	}
	remote := map[string][]protocol.QueuedTurn{}
	for _, s := range ss {
		if !m.cfg.Runs(s.ID) {
			remote[s.ID] = []protocol.QueuedTurn{}
		}
	}
	if len(remote) == 0 {
		return nil, nil
	}
	open, err := m.cfg.Store.OpenQueuedTurns(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range open {
		if l, ok := remote[q.SessionID]; ok {
			remote[q.SessionID] = append(l, q.Wire())
		}
	}
	return remote, nil
}

// pendingLocked describes a waiting call: from its row, and in full from
// the request when this manager holds it. m.mu must be held.
func (m *Manager) pendingLocked(c store.ToolCall) protocol.PendingApproval {
	in := c.Input
	if len(in) == 0 {
		in = json.RawMessage("{}")
	}
	p := protocol.PendingApproval{ApprovalID: c.ApprovalID, ToolUseID: c.ID, ToolName: c.Name, Input: in,
		SessionID: c.SessionID, TurnID: c.TurnID, RequestedAt: c.UpdatedAt}
	if a := m.approvals[c.ApprovalID]; a != nil {
		p.Targets, p.Reason, p.SessionRules = a.req.Targets, a.req.Verdict.Reason, a.req.SessionRules
		p.RequestedAt, p.ExpiresAt = a.requested.UTC(), a.expires.UTC()
		if a.req.Call != nil {
			p.Kind = string(a.req.Call.Kind)
		}
	}
	return p
}
