package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/routing"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// MaxTurnContent bounds a user message, in bytes.
const MaxTurnContent = 1 << 20

// Submit starts a turn with the user's text and returns its id once
// turn.started (carrying the persisted user message) is committed. Only
// one turn per session runs at a time: a second fails with
// ErrTurnInFlight.
func (m *Manager) Submit(ctx context.Context, sessionID, content string) (string, error) {
	t, err := m.submit(ctx, sessionID, content, "")
	if err != nil {
		return "", err
	}
	return t.id, nil
}

// RunTurn runs a turn on a session and waits for its end, returning the
// loop's outcome. model, if not empty, runs the turn on that model
// whatever the routing policy says (as "/model" does). If ctx is
// cancelled first, the turn is cancelled with ctx's cancel reason, and
// RunTurn still waits for the turn to wind down (its cancellation events
// are emitted) before returning ctx's error. Delegation runs worker
// turns this way.
func (m *Manager) RunTurn(ctx context.Context, sessionID, content, modelID string) (agent.Outcome, error) {
	t, err := m.submit(ctx, sessionID, content, modelID)
	if err != nil {
		return agent.Outcome{}, err
	}
	select {
	case <-t.done:
		return t.out, nil
	case <-ctx.Done():
		m.cancelTurn(sessionID, t.id, agent.CancelReason(ctx))
		<-t.done
		return t.out, ctx.Err()
	}
}

func (m *Manager) submit(ctx context.Context, sessionID, content, modelID string) (*activeTurn, error) {
	if strings.TrimSpace(content) == "" {
		return nil, fmt.Errorf("%w: content is empty", ErrInvalid)
	}
	override, rest, isCommand := routing.ParseCommand(content)
	if modelID != "" && !isCommand {
		if err := m.cfg.Models.Check(modelID); err != nil {
			_, msg := model.Classify(err)
			return nil, fmt.Errorf("%w: %s", ErrInvalid, msg)
		}
		override = modelID
	}
	if isCommand {
		if rest == "" {
			return nil, fmt.Errorf("%w: nothing to send after /model %s", ErrInvalid, override)
		}
		if err := m.cfg.Models.Check(override); err != nil {
			_, msg := model.Classify(err)
			return nil, fmt.Errorf("%w: %s", ErrInvalid, msg)
		}
		content = rest
	}
	if len(content) > MaxTurnContent {
		return nil, fmt.Errorf("%w: content is %d bytes; the limit is %d", ErrInvalid, len(content), MaxTurnContent)
	}
	s, err := m.cfg.Store.Session(ctx, sessionID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, sessionID)
		}
		return nil, err
	}
	root, err := os.OpenRoot(s.WorkspacePath)
	if err != nil {
		return nil, fmt.Errorf("%w: workspace %s cannot be opened: %v", ErrInvalid, s.WorkspacePath, err)
	}

	t := &activeTurn{id: event.NewID("turn_"), done: make(chan struct{}), sessionID: sessionID, mode: modeOf(s)}
	// The session's tree: a top session is its own (no more reads); a
	// worker walks up to the top, whose rules it follows.
	t.root = sessionID
	treeRules := s.SessionRules
	if s.ParentSessionID != "" {
		if t.chain, err = m.chainOf(ctx, sessionID); err == nil {
			t.root = t.chain[len(t.chain)-1]
			var top store.Session
			top, err = m.cfg.Store.Session(ctx, t.root)
			treeRules = top.SessionRules
		}
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	if err := m.admit(ctx, sessionID, t); err != nil {
		root.Close()
		return nil, err
	}
	m.loadRules(t.root, treeRules)

	release := m.releaser(sessionID, t, root)
	em, err := m.cfg.Bus.Emitter(ctx, sessionID)
	if err != nil {
		release()
		return nil, err
	}
	now := time.Now().UTC()
	user := message.Message{ID: event.NewID("msg_"), SessionID: sessionID, TurnID: t.id, Role: message.RoleUser,
		Content: []message.Block{message.Text(content)}, Status: message.StatusComplete, CreatedAt: now}
	ops := []store.Op{
		store.PutTurn{Turn: store.Turn{ID: t.id, SessionID: sessionID, Status: store.TurnInFlight, StartedAt: now}},
		store.PutMessage{Message: user},
	}
	if s.Title == "" {
		// The first turn names the session, in the transaction of the
		// turn.started that announces it (the store keeps a title once set).
		ops = append(ops, store.SetTitle{SessionID: sessionID, Title: content})
	}
	if _, err := em.EmitWait(ctx, bus.Spec{Type: event.TurnStarted, TurnID: t.id, Actor: event.ActorUser,
		Payload: map[string]any{"user_message": user}, Ops: ops}); err != nil {
		release()
		return nil, fmt.Errorf("start turn: %w", err)
	}

	turnCtx, cancel := context.WithCancelCause(context.Background())
	m.mu.Lock()
	t.cancel = cancel
	pending := t.pending // a client that saw turn.started live may have cancelled already
	if pending == "" && m.closing {
		t.cancelling, t.reason, pending = true, agent.ReasonServerShutdown, agent.ReasonServerShutdown
	}
	if pending != "" {
		cancel(&agent.CancelCause{Reason: pending})
	}
	m.mu.Unlock()
	var timeout *time.Timer
	if m.cfg.TurnTimeout > 0 {
		timeout = time.AfterFunc(m.cfg.TurnTimeout, func() {
			m.cancelTurn(sessionID, t.id, agent.ReasonTurnTimeout)
		})
	}

	go func() {
		defer release()
		defer cancel(nil)
		if timeout != nil {
			defer timeout.Stop()
		}
		out := m.cfg.Loop.Run(turnCtx, agent.Turn{ID: t.id, SessionID: sessionID, SessionModel: s.ActiveModel,
			Workspace: s.WorkspacePath, Root: root, Emitter: em, Router: m.cfg.Router, UserText: content,
			Worker: s.ParentSessionID != "", ModelOverride: override, History: m.cachedHistory(sessionID, user),
			Mode: sessionMode(s), MaxTurnCostUSD: s.MaxTurnCostUSD, MaxSessionCostUSD: s.MaxSessionCostUSD, SessionCostUSD: s.CostUSD,
			Ending: func(st store.TurnStatus) string { return m.ending(t, st) }, Permissions: m.permissionsOf(t)})
		// Run returns once the turn's terminal event is committed (retried
		// through storage failures), so the conversation it hands back is
		// the stored one; it is nil unless the turn completed, and the next
		// turn then reloads the conversation from the store. The end was
		// fixed through Ending (cancels answer from it); a turn that
		// failed after all (or never reached Ending) is recorded here. The
		// barrier below also waits for the delivery of the end.
		m.rememberHistory(sessionID, out.Conversation)
		ended := out.Status
		if ended == "" {
			ended = store.TurnFailed
		}
		m.mu.Lock()
		if t.ended == "" || ended == store.TurnFailed {
			t.ended = ended
		}
		t.out = out
		moved := t.reason == ReasonOwnerLost
		m.mu.Unlock()
		if moved {
			// Cluster mode: this node lost the turn's tree to another
			// node, which ends the turn (turn.cancelled, owner_lost); its
			// events here could not be written, and there is nothing to
			// wait for.
			m.log.Info("turn left to the tree's new owner: this node lost the tree", "session", sessionID, "turn", t.id,
				"reason", ReasonOwnerLost)
			return
		}
		bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := em.Barrier(bctx); err != nil {
			m.log.Warn("turn end not committed", "session", sessionID, "turn", t.id, "err", err)
		}
		bcancel()
		m.log.Info("turn ended", "session", sessionID, "turn", t.id, "status", out.Status, "reason", out.Reason)
	}()
	return t, nil
}

// releaser returns what frees the session's turn slot once t (admitted)
// has ended: it forgets t, closes its done channel and root, and ends its
// count in the manager's wait group.
func (m *Manager) releaser(sessionID string, t *activeTurn, root *os.Root) func() {
	return func() {
		m.mu.Lock()
		delete(m.turns, sessionID)
		m.forgetRulesLocked(t.root)
		m.mu.Unlock()
		close(t.done)
		root.Close()
		m.wg.Done()
	}
}

// admit registers t as the session's turn in flight. A turn whose
// terminal event is already committed (a client may have seen it and
// sent the next message at once) is still winding down: admit waits for
// it rather than refusing. A turn still running fails with
// ErrTurnInFlight.
func (m *Manager) admit(ctx context.Context, sessionID string, t *activeTurn) error {
	for {
		m.mu.Lock()
		if m.closing {
			m.mu.Unlock()
			return ErrClosed
		}
		cur := m.turns[sessionID]
		if cur == nil {
			m.turns[sessionID] = t
			m.wg.Add(1)
			m.mu.Unlock()
			return nil
		}
		m.mu.Unlock()
		row, err := m.cfg.Store.Turn(ctx, cur.id)
		if err != nil || row.Status == store.TurnInFlight {
			return fmt.Errorf("%w: turn %s", ErrTurnInFlight, cur.id)
		}
		select {
		case <-cur.done:
		case <-ctx.Done():
			return fmt.Errorf("wait for turn %s to wind down: %w", cur.id, ctx.Err())
		}
	}
}

// ending is the turn's agent.Turn.Ending: it fixes how the turn ends,
// under the lock cancels take, so every cancel is answered with what
// then happens. A turn about to complete or fail that a cancel reached
// first ends cancelled (the reason is returned); once the end is fixed,
// cancels answer already_ended (or already_cancelling).
func (m *Manager) ending(t *activeTurn, st store.TurnStatus) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st != store.TurnCancelled && t.cancelling {
		t.ended = store.TurnCancelled
		return t.reason
	}
	t.ended = st
	return ""
}

// CancelResult tells what a cancel request did; its values are wire
// vocabulary (protocol.CancelResult).
type CancelResult = protocol.CancelResult

// Cancel outcomes.
const (
	Cancelling        = protocol.CancelCancelling
	AlreadyCancelling = protocol.CancelAlreadyCancelling
	AlreadyEnded      = protocol.CancelAlreadyEnded
)

// Cancel cancels a turn of a session with a reason (default
// user_cancel). It is idempotent: only the first cancel of a turn has
// an effect. Unknown sessions and turns fail with ErrNotFound and
// ErrTurnNotFound.
func (m *Manager) Cancel(ctx context.Context, sessionID, turnID, reason string) (CancelResult, error) {
	if reason == "" {
		reason = agent.ReasonUser
	}
	// A turn whose terminal event is committed (the client may have seen
	// it) has ended, even while it winds down in memory: answer from the
	// store, as every other client would see it.
	if row, err := m.cfg.Store.Turn(ctx, turnID); err != nil || row.SessionID != sessionID || row.Status == store.TurnInFlight {
		if r, ok := m.cancelTurn(sessionID, turnID, reason); ok {
			return r, nil
		}
	}
	t, err := m.storedTurn(ctx, sessionID, turnID)
	if err != nil {
		return "", err
	}
	if t.Status == store.TurnCancelled {
		m.cfg.Bus.Warn(sessionID, "session-manager", "redundant_cancel", map[string]any{"turn_id": turnID})
		return AlreadyCancelling, nil
	}
	return AlreadyEnded, nil
}

// cancelTurn cancels the in-flight turn if it is turnID; ok is false if
// that turn is not in flight.
func (m *Manager) cancelTurn(sessionID, turnID, reason string) (CancelResult, bool) {
	m.mu.Lock()
	t := m.turns[sessionID]
	if t == nil || t.id != turnID {
		m.mu.Unlock()
		return "", false
	}
	switch {
	case t.ended == store.TurnCancelled || t.ended == "" && t.cancelling:
		m.mu.Unlock()
		m.cfg.Bus.Warn(sessionID, "session-manager", "redundant_cancel", map[string]any{"turn_id": turnID})
		return AlreadyCancelling, true
	case t.ended != "":
		m.mu.Unlock()
		return AlreadyEnded, true
	case t.cancel == nil:
		// turn.started is out but the turn's context is not set up yet:
		// Submit cancels it with this reason as soon as it is.
		t.cancelling, t.pending, t.reason = true, reason, reason
		m.mu.Unlock()
		return Cancelling, true
	}
	// The context is cancelled under the lock, so the loop's ending (which
	// takes it) sees either no cancel or a cancelled context.
	t.cancelling, t.reason = true, reason
	t.cancel(&agent.CancelCause{Reason: reason})
	m.cancelApprovalsLocked(t)
	m.mu.Unlock()
	return Cancelling, true
}

// Wait blocks until the turn in flight on sessionID (if any) has ended.
func (m *Manager) Wait(ctx context.Context, sessionID string) error {
	m.mu.Lock()
	t := m.turns[sessionID]
	m.mu.Unlock()
	if t == nil {
		return nil
	}
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown refuses new turns, cancels every turn in flight with reason
// server_shutdown, and waits (bounded by ctx) for them to end.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closing = true
	for _, t := range m.turns {
		if !t.cancelling && t.cancel != nil && t.ended == "" {
			t.cancelling, t.reason = true, agent.ReasonServerShutdown
			t.cancel(&agent.CancelCause{Reason: agent.ReasonServerShutdown})
			m.cancelApprovalsLocked(t)
		}
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("session shutdown: %w", ctx.Err())
	}
}

// storedTurn reads a turn of a session from the store: ErrNotFound for
// an unknown session, ErrTurnNotFound for a turn not in it.
func (m *Manager) storedTurn(ctx context.Context, sessionID, turnID string) (store.Turn, error) {
	if _, err := m.cfg.Store.Session(ctx, sessionID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.Turn{}, fmt.Errorf("%w: %s", ErrNotFound, sessionID)
		}
		return store.Turn{}, err
	}
	t, err := m.cfg.Store.Turn(ctx, turnID)
	if err != nil || t.SessionID != sessionID {
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return store.Turn{}, fmt.Errorf("%w: %s in session %s", ErrTurnNotFound, turnID, sessionID)
		}
		return store.Turn{}, err
	}
	return t, nil
}

// permissionsOf returns the agent.Permissions of a turn, nil when the
// manager has no policy.
func (m *Manager) permissionsOf(t *activeTurn) agent.Permissions {
	if m.cfg.Policy == nil {
		return nil
	}
	return turnPerms{m: m, t: t}
}

// loadRules merges a tree's stored session rules into those held for it
// (an answer's rules are held from the moment it wins, and stored with
// its approval.resolved a moment later).
func (m *Manager) loadRules(root string, stored []string) {
	rules, err := permission.ParseAllowRules(stored)
	if err != nil {
		m.log.Warn("a stored session rule no longer parses; it is ignored", "session", root, "err", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addRulesLocked(root, rules)
}

// forgetRulesLocked drops a tree's rules once none of its turns is in
// flight. m.mu must be held.
func (m *Manager) forgetRulesLocked(root string) {
	for _, t := range m.turns {
		if t.root == root {
			return
		}
	}
	delete(m.rules, root)
}
