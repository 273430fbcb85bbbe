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
// ErrTurnInFlight. SubmitTurn takes images, queues and steers.
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
	in, err := m.prepare(ctx, sessionID, content, modelID, nil)
	if err != nil {
		return nil, err
	}
	t := &activeTurn{id: event.NewID("turn_"), done: make(chan struct{})}
	if _, err := m.admit(ctx, sessionID, t, false); err != nil {
		return nil, err
	}
	if err := m.start(ctx, t, in); err != nil {
		return nil, err
	}
	return t, nil
}

// turnInput is a user message ready to start (or queue, or steer) a
// turn: checked, its images validated and read, not yet stored.
type turnInput struct {
	session store.Session
	// text is the message's text, a leading "/model provider:model "
	// taken off (override names that model).
	text, override string
	// user is the user message (its TurnID is set when the turn is
	// known); images the bytes of its image blocks, stored with the event
	// that first carries it.
	user   message.Message
	images []store.Image
}

// prepare checks a user message for a turn of sessionID and builds it.
func (m *Manager) prepare(ctx context.Context, sessionID, content, modelID string, imgs []protocol.ImageInput) (turnInput, error) {
	if strings.TrimSpace(content) == "" {
		return turnInput{}, fmt.Errorf("%w: content is empty", ErrInvalid)
	}
	override, rest, isCommand := routing.ParseCommand(content)
	if modelID != "" && !isCommand {
		if err := m.cfg.Models.Check(modelID); err != nil {
			_, msg := model.Classify(err)
			return turnInput{}, fmt.Errorf("%w: %s", ErrInvalid, msg)
		}
		override = modelID
	}
	if isCommand {
		if rest == "" {
			return turnInput{}, fmt.Errorf("%w: nothing to send after /model %s", ErrInvalid, override)
		}
		if err := m.cfg.Models.Check(override); err != nil {
			_, msg := model.Classify(err)
			return turnInput{}, fmt.Errorf("%w: %s", ErrInvalid, msg)
		}
		content = rest
	}
	if len(content) > MaxTurnContent {
		return turnInput{}, fmt.Errorf("%w: content is %d bytes; the limit is %d", ErrInvalid, len(content), MaxTurnContent)
	}
	blocks, stored, err := m.checkImages(ctx, imgs)
	if err != nil {
		return turnInput{}, err
	}
	s, err := m.session(ctx, sessionID)
	if err != nil {
		return turnInput{}, err
	}
	user := message.Message{ID: event.NewID("msg_"), SessionID: sessionID, Role: message.RoleUser,
		Content: append([]message.Block{message.Text(content)}, blocks...), Status: message.StatusComplete, CreatedAt: time.Now().UTC()}
	return turnInput{session: s, text: content, override: override, user: user, images: stored}, nil
}

// start starts admitted turn t with in: it commits turn.started (with
// extra, the ops of a queued turn's start) and runs the agent loop in a
// goroutine the manager owns. On error t's slot is released.
func (m *Manager) start(ctx context.Context, t *activeTurn, in turnInput, extra ...store.Op) error {
	s, sessionID := in.session, in.session.ID
	root, err := os.OpenRoot(s.WorkspacePath)
	if err != nil {
		m.release(sessionID, t, nil)
		return fmt.Errorf("%w: workspace %s cannot be opened: %v", ErrInvalid, s.WorkspacePath, err)
	}
	if err := m.bindTree(ctx, t, s); err != nil {
		root.Close()
		m.release(sessionID, t, nil)
		return err
	}
	release := func() { m.release(sessionID, t, root) }
	em, err := m.cfg.Bus.Emitter(ctx, sessionID)
	if err != nil {
		release()
		return err
	}
	now := time.Now().UTC()
	user := in.user
	user.TurnID = t.id
	ops := append([]store.Op{}, extra...)
	if len(in.images) > 0 {
		ops = append(ops, store.PutImages{SessionID: sessionID, Images: in.images})
	}
	ops = append(ops,
		store.PutTurn{Turn: store.Turn{ID: t.id, SessionID: sessionID, Status: store.TurnInFlight, StartedAt: now}},
		store.PutMessage{Message: user})
	if s.Title == "" {
		// The first turn names the session, in the transaction of the
		// turn.started that announces it (the store keeps a title once set).
		ops = append(ops, store.SetTitle{SessionID: sessionID, Title: in.text})
	}
	if _, err := em.EmitWait(ctx, bus.Spec{Type: event.TurnStarted, TurnID: t.id, Actor: event.ActorUser,
		Payload: map[string]any{"user_message": user}, Ops: ops}); err != nil {
		release()
		return fmt.Errorf("start turn: %w", err)
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
			Workspace: s.WorkspacePath, Root: root, Emitter: em, Router: m.cfg.Router, UserText: in.text,
			Worker: s.ParentSessionID != "", ModelOverride: in.override, History: m.cachedHistory(sessionID, user),
			Mode: sessionMode(s), MaxTurnCostUSD: s.MaxTurnCostUSD, MaxSessionCostUSD: s.MaxSessionCostUSD, SessionCostUSD: s.CostUSD,
			Ending: func(st store.TurnStatus) string { return m.ending(t, st) }, Permissions: m.permissionsOf(t),
			Steer: func() []agent.Steered { return m.steered(t) }})
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
		late := t.inbox // steered messages the turn ended before taking
		t.inbox = nil
		moved := t.reason == ReasonOwnerLost
		m.mu.Unlock()
		if moved {
			// Cluster mode: this node lost the turn's tree to another
			// node, which ends the turn (turn.cancelled, owner_lost); its
			// events here could not be written, and there is nothing to
			// wait for. Messages steered into it were never stored.
			m.log.Info("turn left to the tree's new owner: this node lost the tree", "session", sessionID, "turn", t.id,
				"reason", ReasonOwnerLost, "steered_messages_lost", len(late))
			return
		}
		m.queueLate(sessionID, late)
		bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := em.Barrier(bctx); err != nil {
			m.log.Warn("turn end not committed", "session", sessionID, "turn", t.id, "err", err)
		}
		bcancel()
		m.log.Info("turn ended", "session", sessionID, "turn", t.id, "status", out.Status, "reason", out.Reason)
	}()
	return nil
}

// bindTree sets admitted turn t's permission state from session s:
// its mode, and its delegation tree (a top session is its own; a
// worker walks up to the top, whose rules it follows), whose session
// rules it loads.
func (m *Manager) bindTree(ctx context.Context, t *activeTurn, s store.Session) error {
	root, treeRules := s.ID, s.SessionRules
	var chain []string
	if s.ParentSessionID != "" {
		var err error
		if chain, err = m.chainOf(ctx, s.ID); err != nil {
			return err
		}
		root = chain[len(chain)-1]
		top, err := m.cfg.Store.Session(ctx, root)
		if err != nil {
			return err
		}
		treeRules = top.SessionRules
	}
	m.mu.Lock()
	t.sessionID, t.mode, t.chain, t.root = s.ID, modeOf(s), chain, root
	m.mu.Unlock()
	m.loadRules(root, treeRules)
	return nil
}

// releaser returns what frees the session's turn slot once t (admitted)
// has ended (see release).
func (m *Manager) releaser(sessionID string, t *activeTurn, root *os.Root) func() {
	return func() { m.release(sessionID, t, root) }
}

// release frees the session's turn slot once t (admitted) has ended: it
// forgets t and, in the same critical section, hands the slot to the
// next queued turn (queue.go); then it closes t's done channel and root,
// and ends its count in the manager's wait group.
func (m *Manager) release(sessionID string, t *activeTurn, root *os.Root) {
	m.mu.Lock()
	if m.turns[sessionID] == t {
		delete(m.turns, sessionID)
		m.forgetRulesLocked(t.root)
	}
	next := m.handOffLocked(sessionID)
	m.mu.Unlock()
	close(t.done)
	if root != nil {
		root.Close()
	}
	m.wg.Done()
	next()
}

// admit registers t as the session's turn in flight. A turn whose
// terminal event is already committed (a client may have seen it and
// sent the next message at once) is still winding down: admit waits for
// it rather than refusing. While a turn runs (or turns wait in the
// session's queue) it fails with ErrTurnInFlight, unless queue: then it
// reports true, and the caller queues the turn (enqueue) instead.
func (m *Manager) admit(ctx context.Context, sessionID string, t *activeTurn, queue bool) (bool, error) {
	for {
		m.mu.Lock()
		if m.closing {
			m.mu.Unlock()
			return false, ErrClosed
		}
		cur, waiting := m.turns[sessionID], len(m.queues[sessionID])
		if cur == nil && waiting == 0 {
			m.turns[sessionID] = t
			m.wg.Add(1)
			m.mu.Unlock()
			return false, nil
		}
		m.mu.Unlock()
		if cur != nil && waiting == 0 {
			row, err := m.cfg.Store.Turn(ctx, cur.id)
			if err == nil && row.Status != store.TurnInFlight {
				select {
				case <-cur.done:
					continue
				case <-ctx.Done():
					return false, fmt.Errorf("wait for turn %s to wind down: %w", cur.id, ctx.Err())
				}
			}
		}
		if queue {
			return true, nil
		}
		if cur == nil {
			return false, fmt.Errorf("%w: %d turns wait in the session's queue", ErrTurnInFlight, waiting)
		}
		return false, fmt.Errorf("%w: turn %s", ErrTurnInFlight, cur.id)
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
	if r, ok, err := m.cancelQueued(ctx, sessionID, turnID, reason); ok {
		return r, err
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
