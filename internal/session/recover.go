package session

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Recover closes the turns a crash left in flight (single-node mode,
// once at start): each gets turn.cancelled with reason server_restart
// and phase interrupted, after llm.call_failed (cancelled) for the model
// call it left open, if any, and tool.failed (cancelled) for each of its
// unfinished tool calls. A delegation the turn had started and not
// finished first gets delegate.failed (failure mode interrupted): the
// worker's own turn is closed the same way, before its planner's.
// Then the turns that wait in queues are read back and run, each
// session's in order (docs/conversation.md).
func (m *Manager) Recover(ctx context.Context) error {
	if _, err := m.recoverTurns(ctx, func(string) (bool, error) { return true, nil },
		protocol.CancelReasonServerRestart, "server restarted"); err != nil {
		return err
	}
	return m.resumeQueues(ctx)
}

// RecoverTree closes the turns of one delegation tree left in flight by
// the node that ran it (cluster mode: the node died or lost the tree's
// lease, and this one took the tree over). Each gets the sequence
// Recover emits, with reason owner_lost. It returns the ids of the
// turns it closed.
//
// Call it once the store shows every catalog event of the tree (the
// node's projection applied the tree's log) and while this node owns
// the tree. Turns this manager runs itself are left alone: they end on
// their own.
func (m *Manager) RecoverTree(ctx context.Context, tree string) ([]string, error) {
	ended, err := m.recoverTurns(ctx, func(sessionID string) (bool, error) {
		root, err := m.treeOf(ctx, sessionID)
		return root == tree, err
	}, protocol.CancelReasonOwnerLost, "the tree's owner node was lost")
	if err != nil {
		return ended, err
	}
	// The background commands the previous owner ran ended with it
	// (background.go).
	bg, err := m.endLostBackground(ctx, tree)
	if len(bg) > 0 {
		m.cfg.Logger.Warn("ended the background commands the tree's previous owner left", "tree", tree, "commands", bg)
	}
	return ended, err
}

// recoverTurns ends every open turn in the store whose session match
// selects with turn.cancelled(reason, phase interrupted), committing
// the turn row with it. Before it, the model call it left open gets
// llm.call_failed (cancelled), the turn's unfinished delegations
// get delegate.failed, and each of its pending or running tool calls
// tool.failed (error class cancelled, note as the message), its row
// marked cancelled in the same commit; turn.cancelled lists them in
// cancelled_tool_use_ids, as a live cancel does. Turns are closed
// newest first, so a worker's turn ends before its planner's, in the
// order a live cancel gives.
func (m *Manager) recoverTurns(ctx context.Context, match func(sessionID string) (bool, error), reason, note string) ([]string, error) {
	open, err := m.cfg.Store.OpenTurns(ctx)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	slices.Reverse(open)
	var closed []string
	for _, t := range open {
		ok, err := match(t.SessionID)
		if err != nil {
			return closed, fmt.Errorf("recover turn %s: %w", t.ID, err)
		}
		if !ok || m.running(t.SessionID, t.ID) {
			continue
		}
		em, err := m.cfg.Bus.Emitter(ctx, t.SessionID)
		if err != nil {
			return closed, fmt.Errorf("recover turn %s: %w", t.ID, err)
		}
		calls, err := m.cfg.Store.ToolCalls(ctx, t.ID)
		if err != nil {
			return closed, fmt.Errorf("recover turn %s: %w", t.ID, err)
		}
		if err := m.failOpenCall(ctx, em, t, note); err != nil {
			return closed, fmt.Errorf("recover turn %s: %w", t.ID, err)
		}
		if err := m.failDelegations(ctx, em, t, note); err != nil {
			return closed, fmt.Errorf("recover turn %s: %w", t.ID, err)
		}
		cancelled := []string{}
		for _, c := range calls {
			if c.Status == store.ToolAwaitingApproval {
				// A request left waiting is denied first, as a cancel
				// denies it (docs/permissions.md).
				if c, err = m.denyLeftRequest(ctx, em, t, c); err != nil {
					return closed, fmt.Errorf("recover turn %s: tool call %s: %w", t.ID, c.ID, err)
				}
			}
			if c.Status != store.ToolPending && c.Status != store.ToolRunning {
				continue
			}
			started := c.Status == store.ToolRunning
			c.Status, c.ErrorClass, c.ErrorMessage, c.UpdatedAt = store.ToolCancelled, "cancelled", note, time.Now()
			if _, err := em.EmitWait(ctx, bus.Spec{Type: event.ToolFailed, TurnID: t.ID, Actor: event.ActorSession,
				Payload: protocol.ToolFailedPayload{ToolUseID: c.ID, ToolName: c.Name, ErrorClass: "cancelled",
					Message: note, Started: started},
				Ops: []store.Op{store.PutToolCall{Call: c}}}); err != nil {
				return closed, fmt.Errorf("recover turn %s: tool call %s: %w", t.ID, c.ID, err)
			}
			cancelled = append(cancelled, c.ID)
		}
		t.Status, t.Reason, t.EndedAt = store.TurnCancelled, reason, time.Now()
		if _, err := em.EmitWait(ctx, bus.Spec{Type: event.TurnCancelled, TurnID: t.ID, Actor: event.ActorSession,
			Payload: map[string]any{"reason": reason, "phase": protocol.CancelPhaseInterrupted, "cancelled_tool_use_ids": cancelled},
			Ops:     []store.Op{store.PutTurn{Turn: t}}}); err != nil {
			return closed, fmt.Errorf("recover turn %s: %w", t.ID, err)
		}
		closed = append(closed, t.ID)
		m.log.Warn("closed a turn left open", "session", t.SessionID, "turn", t.ID, "reason", reason)
	}
	return closed, nil
}

// failOpenCall emits llm.call_failed (error class cancelled, note as
// its message, actor session) for the model call turn t left open, if
// any: its last llm.call_* event is llm.call_started. The trace then
// shows how every call ended, and a client resuming from one of the
// call's deltas learns that the rest of them are gone (its replay
// reports a streaming gap). The message the call was streaming was
// never stored, and is not: its deltas died with the process.
func (m *Manager) failOpenCall(ctx context.Context, em *bus.Emitter, t store.Turn, note string) error {
	var open *event.Event
	err := m.cfg.Store.ScanEvents(ctx, store.EventQuery{SessionIDs: []string{t.SessionID},
		Types: []event.Type{event.LLMCallStarted, event.LLMCallCompleted, event.LLMCallFailed}},
		func(r store.EventRow) error {
			ev, err := event.Decode(r.Body)
			if err != nil || ev.TurnID != t.ID {
				return err
			}
			open = nil
			if ev.Type == event.LLMCallStarted {
				open = ev
			}
			return nil
		})
	if err != nil || open == nil {
		return err
	}
	var p protocol.LLMCallStartedPayload
	if err := open.DecodePayload(&p); err != nil {
		return fmt.Errorf("llm.call_started %s: %w", open.ID, err)
	}
	if _, err := em.EmitWait(ctx, bus.Spec{Type: event.LLMCallFailed, TurnID: t.ID, Actor: event.ActorSession,
		Payload: protocol.LLMCallFailedPayload{MessageID: p.MessageID, Model: p.Model, ErrorClass: "cancelled",
			Message: note + "; the model call was not resumed"}}); err != nil {
		return fmt.Errorf("model call %s: %w", p.MessageID, err)
	}
	return nil
}

// failDelegations emits delegate.failed (failure mode interrupted, note
// as its message) for each delegation turn t started and never
// finished, in the order they started. A recovery that stops half-way
// and runs again finds them finished and emits nothing twice.
func (m *Manager) failDelegations(ctx context.Context, em *bus.Emitter, t store.Turn, note string) error {
	last, err := m.cfg.Store.LastEventID(ctx, t.SessionID)
	if err != nil || last == "" {
		return err
	}
	evs, err := m.cfg.Store.Delegations(ctx, t.SessionID, last)
	if err != nil {
		return err
	}
	var open []string // worker session ids, in the order they started
	for _, ev := range evs {
		if ev.TurnID != t.ID {
			continue
		}
		var p protocol.DelegateStartedPayload // its worker_session_id, common to the three
		if ev.DecodePayload(&p) != nil || p.WorkerSessionID == "" {
			continue
		}
		if ev.Type == event.DelegateStarted {
			open = append(open, p.WorkerSessionID)
		} else {
			open = slices.DeleteFunc(open, func(id string) bool { return id == p.WorkerSessionID })
		}
	}
	for _, worker := range open {
		if _, err := em.EmitWait(ctx, bus.Spec{Type: event.DelegateFailed, TurnID: t.ID, Actor: event.ActorSession,
			Payload: protocol.DelegateFailedPayload{WorkerSessionID: worker, FailureMode: protocol.DelegateFailureInterrupted,
				Message: note + "; the delegation was not resumed"}}); err != nil {
			return fmt.Errorf("delegation to %s: %w", worker, err)
		}
	}
	return nil
}

// running reports whether this manager runs turn turnID of sessionID.
func (m *Manager) running(sessionID, turnID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.turns[sessionID]
	return t != nil && t.id == turnID
}

// CancelTree cancels, with reason, every turn of a delegation tree in
// flight in this manager (cluster mode: the node lost the tree, so none
// of the turns' later events can commit; the tree's new owner ends them
// in the log). It returns the ids of the turns it cancelled.
func (m *Manager) CancelTree(ctx context.Context, tree, reason string) ([]string, error) {
	var cancelled []string
	for sid, id := range m.inFlight() {
		root, err := m.treeOf(ctx, sid)
		if err != nil {
			return cancelled, fmt.Errorf("cancel tree %s: %w", tree, err)
		}
		if root != tree {
			continue
		}
		if res, ok := m.cancelTurn(sid, id, reason); ok && res == Cancelling {
			cancelled = append(cancelled, id)
		}
	}
	if reason == ReasonOwnerLost {
		// The tree's background commands here stop too: the node that
		// takes the tree over reports their ends (background.go).
		sessions, err := m.treeSessions(ctx, tree)
		if err != nil {
			return cancelled, fmt.Errorf("cancel tree %s: %w", tree, err)
		}
		m.endBackground(ctx, sessions, protocol.BackgroundOwnerLost)
	}
	return cancelled, nil
}

// WaitTree blocks until no turn of a delegation tree is in flight in
// this manager, or ctx is done.
func (m *Manager) WaitTree(ctx context.Context, tree string) error {
	for sid := range m.inFlight() {
		root, err := m.treeOf(ctx, sid)
		if err != nil {
			return fmt.Errorf("wait for tree %s: %w", tree, err)
		}
		if root != tree {
			continue
		}
		if err := m.Wait(ctx, sid); err != nil {
			return fmt.Errorf("wait for tree %s: %w", tree, err)
		}
	}
	return nil
}

// inFlight returns the turns in flight, by session.
func (m *Manager) inFlight() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.turns))
	for sid, t := range m.turns {
		out[sid] = t.id
	}
	return out
}

// maxDelegationDepth bounds the walk up a delegation chain (a corrupt
// chain cannot loop forever).
const maxDelegationDepth = 64

// treeOf returns the root of a session's delegation tree, from the
// store.
func (m *Manager) treeOf(ctx context.Context, sessionID string) (string, error) {
	id := sessionID
	for range maxDelegationDepth {
		s, err := m.cfg.Store.Session(ctx, id)
		if err != nil {
			return "", fmt.Errorf("tree of %s: %w", sessionID, err)
		}
		if s.ParentSessionID == "" {
			return id, nil
		}
		id = s.ParentSessionID
	}
	return "", fmt.Errorf("tree of %s: delegation chain deeper than %d", sessionID, maxDelegationDepth)
}

// ReasonOwnerLost is the cancel reason of the turns of a tree its node
// lost (see CancelTree and RecoverTree).
const ReasonOwnerLost = protocol.CancelReasonOwnerLost

// OpenTrees returns the delegation trees that have a turn open in the
// store which this manager does not run (cluster mode: turns of a node
// that died or lost its tree; RecoverTree ends them once the tree is
// taken over).
func (m *Manager) OpenTrees(ctx context.Context) ([]string, error) {
	open, err := m.cfg.Store.OpenTurns(ctx)
	if err != nil {
		return nil, fmt.Errorf("open trees: %w", err)
	}
	seen := map[string]bool{}
	var trees []string
	for _, t := range open {
		if m.running(t.SessionID, t.ID) {
			continue
		}
		root, err := m.treeOf(ctx, t.SessionID)
		if err != nil {
			return trees, fmt.Errorf("open trees: %w", err)
		}
		if !seen[root] {
			seen[root] = true
			trees = append(trees, root)
		}
	}
	return trees, nil
}

// denyLeftRequest emits approval.resolved (deny, reason cancelled) for
// the request a call left waiting, its row marked pending with the
// resolution, and returns the row.
func (m *Manager) denyLeftRequest(ctx context.Context, em *bus.Emitter, t store.Turn, c store.ToolCall) (store.ToolCall, error) {
	c.Status, c.UpdatedAt = store.ToolPending, time.Now()
	c.Approval = &store.Approval{Decision: protocol.DecisionDeny, Reason: protocol.ApprovalReasonCancelled}
	_, err := em.EmitWait(ctx, bus.Spec{Type: event.ApprovalResolved, TurnID: t.ID, Actor: event.ActorSession,
		Payload: protocol.ApprovalResolvedPayload{ApprovalID: c.ApprovalID, ToolUseID: c.ID, Decision: protocol.DecisionDeny,
			Reason: protocol.ApprovalReasonCancelled, ToolName: c.Name},
		Ops: []store.Op{store.PutToolCall{Call: c}}})
	return c, err
}
