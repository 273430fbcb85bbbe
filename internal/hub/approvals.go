package hub

import (
	"context"
	"slices"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// A worker's approval requests reach its planners' clients whatever
// their filter says of workers: the user watches the planner, and a
// request nobody sees would wait until it times out. The events keep
// their worker's session_id, live, in replay and across the seam, and
// a planner's snapshot lists its workers' pending requests; a client
// answers at the planner's or the worker's URL alike
// (docs/permissions.md).

// plannerTypes are the event types a planner's clients receive from its
// workers without include_worker_sessions.
var plannerTypes = []event.Type{event.ApprovalRequested, event.ApprovalResolved}

// reachesPlanners reports whether events of type t from a worker reach
// every client of its planners.
func reachesPlanners(t event.Type) bool { return slices.Contains(plannerTypes, t) }

// plannerTypesOf returns the types of plannerTypes the filter asks for.
func (f *filter) plannerTypes() []event.Type {
	var out []event.Type
	for _, t := range plannerTypes {
		if f.types[t] {
			out = append(out, t)
		}
	}
	return out
}

// pendingAsOf folds the approval events of sessions (a session and its
// workers) up to seam into the requests still waiting then, in request
// order.
func (h *Hub) pendingAsOf(ctx context.Context, sessions []string, seam string) ([]protocol.PendingApproval, error) {
	out := []protocol.PendingApproval{}
	if seam == "" {
		return out, nil
	}
	err := h.store.ScanEvents(ctx, store.EventQuery{SessionIDs: sessions, UpToID: seam, Types: plannerTypes},
		func(r store.EventRow) error {
			ev, err := event.Decode(r.Body)
			if err != nil {
				return nil // not readable: skipped, as a client would
			}
			switch r.Type {
			case event.ApprovalRequested:
				var p protocol.ApprovalRequestedPayload
				if ev.DecodePayload(&p) != nil || p.ApprovalID == "" {
					return nil
				}
				pa := protocol.PendingApproval{ApprovalID: p.ApprovalID, ToolUseID: p.ToolUseID, ToolName: p.ToolName,
					Input: p.Input, SessionID: r.SessionID, Kind: p.Kind, Targets: p.Targets, Reason: p.Reason,
					SessionRules: p.SessionRules, RequestedAt: r.TS.UTC(), TurnID: ev.TurnID}
				if at, err := time.Parse(time.RFC3339Nano, p.ExpiresAt); err == nil {
					pa.ExpiresAt = at
				}
				out = append(out, pa)
			case event.ApprovalResolved:
				var p protocol.ApprovalResolvedPayload
				if ev.DecodePayload(&p) == nil {
					out = slices.DeleteFunc(out, func(pa protocol.PendingApproval) bool { return pa.ApprovalID == p.ApprovalID })
				}
			}
			return nil
		})
	return out, err
}
