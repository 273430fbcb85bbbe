package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Follow-ups (docs/conversation.md, "Follow-ups: queue and steer"): a
// turn submitted with queue while another runs waits in the session's
// queue, persisted (store.QueueTurn, with its turn.queued event); the
// queue is run in order, each turn started as the slot frees
// (release), whatever way the turn before ended. A queued turn can be
// cancelled before it starts: it ends with turn.cancelled (phase
// queued) and nothing else. After a restart the queue is read back and
// run (Recover).

// DefaultMaxQueuedTurns bounds a session's queue unless configured.
const DefaultMaxQueuedTurns = 10

// queuedTurn is a turn waiting in a session's queue.
type queuedTurn struct {
	id       string
	in       turnInput // in.user.TurnID is id; in.session may be stale (start reads it again)
	source   string    // protocol.QueueSourceQueue or QueueSourceSteer
	queuedAt time.Time
	// ready: its turn.queued is committed. The head of a queue starts
	// only once ready, so turn.started never precedes turn.queued.
	ready bool
}

// SubmitTurn submits a user message (POST /sessions/{id}/turns): it
// starts a turn when the session is idle; with Queue, while a turn runs
// (or others wait), it queues one; with Steer, it sends the message into
// the running turn, which takes it at its next model call (or queues it
// when no turn can take it). Images are checked by content first; a
// refused one fails with ErrInvalidImage and nothing is stored.
func (m *Manager) SubmitTurn(ctx context.Context, sessionID string, req protocol.TurnRequest) (protocol.TurnAccepted, error) {
	if req.Queue && req.Steer {
		return protocol.TurnAccepted{}, fmt.Errorf("%w: send queue or steer, not both", ErrInvalid)
	}
	if req.ExpectedTurnID != "" && !req.Steer {
		return protocol.TurnAccepted{}, fmt.Errorf("%w: expected_turn_id goes with steer", ErrInvalid)
	}
	in, err := m.prepare(ctx, sessionID, req.Content, "", req.Images)
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	if req.Steer {
		if acc, ok, err := m.steer(sessionID, in, req.ExpectedTurnID); ok || err != nil {
			return acc, err
		}
	}
	t := &activeTurn{id: event.NewID("turn_"), done: make(chan struct{})}
	queue, err := m.admit(ctx, sessionID, t, req.Queue || req.Steer)
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	if !queue {
		if err := m.start(ctx, t, in); err != nil {
			return protocol.TurnAccepted{}, err
		}
		return protocol.TurnAccepted{TurnID: t.id, MessageID: in.user.ID}, nil
	}
	source := protocol.QueueSourceQueue
	if req.Steer {
		source = protocol.QueueSourceSteer
	}
	return m.enqueue(ctx, in, source, true)
}

// enqueue queues a turn for in and returns once its turn.queued (with
// the turn's images and its queue row) is committed. capped refuses it
// with ErrQueueFull when the queue is full; a steered message that
// missed its turn is queued uncapped (it was already accepted), even
// while the server stops (the queue is run again after the restart).
func (m *Manager) enqueue(ctx context.Context, in turnInput, source string, capped bool) (protocol.TurnAccepted, error) {
	m.queueMu.Lock()
	defer m.queueMu.Unlock()
	sid := in.session.ID
	m.mu.Lock()
	q := m.queues[sid]
	switch {
	case capped && m.closing:
		m.mu.Unlock()
		return protocol.TurnAccepted{}, ErrClosed
	case capped && len(q) >= m.cfg.MaxQueuedTurns:
		m.mu.Unlock()
		return protocol.TurnAccepted{}, fmt.Errorf("%w: %d turns wait already (max-queued-turns)", ErrQueueFull, len(q))
	}
	qt := &queuedTurn{id: event.NewID("turn_"), in: in, source: source, queuedAt: time.Now().UTC()}
	qt.in.user.TurnID = qt.id
	m.queues[sid] = append(q, qt)
	pos := len(q) + 1
	m.mu.Unlock()

	err := m.emitQueued(ctx, qt, pos)
	m.mu.Lock()
	if err != nil {
		m.removeQueuedLocked(sid, qt.id)
	} else {
		qt.ready, qt.in.images = true, nil // the bytes are stored
	}
	next := m.handOffLocked(sid)
	m.mu.Unlock()
	next()
	if err != nil {
		return protocol.TurnAccepted{}, fmt.Errorf("queue turn: %w", err)
	}
	return protocol.TurnAccepted{TurnID: qt.id, Queued: true, Position: pos, MessageID: qt.in.user.ID}, nil
}

// emitQueued commits qt's turn.queued with its images and queue row.
func (m *Manager) emitQueued(ctx context.Context, qt *queuedTurn, pos int) error {
	sid := qt.in.session.ID
	em, err := m.cfg.Bus.Emitter(ctx, sid)
	if err != nil {
		return err
	}
	user, err := json.Marshal(qt.in.user)
	if err != nil {
		return err
	}
	var ops []store.Op
	if len(qt.in.images) > 0 {
		ops = append(ops, store.PutImages{SessionID: sid, Images: qt.in.images})
	}
	ops = append(ops, store.QueueTurn{Turn: store.QueuedTurn{TurnID: qt.id, SessionID: sid, Message: qt.in.user,
		Model: qt.in.override, Source: qt.source, QueuedAt: qt.queuedAt}})
	_, err = em.EmitWait(ctx, bus.Spec{Type: event.TurnQueued, TurnID: qt.id, Actor: event.ActorUser,
		Payload: protocol.TurnQueuedPayload{UserMessage: user, Position: pos, Source: qt.source, Model: qt.in.override}, Ops: ops})
	return err
}

// removeQueuedLocked takes turn id out of sid's queue; it returns the
// turn and its index, or nil. m.mu is held.
func (m *Manager) removeQueuedLocked(sid, id string) (*queuedTurn, int) {
	q := m.queues[sid]
	for i, qt := range q {
		if qt.id == id {
			q = append(q[:i:i], q[i+1:]...)
			if len(q) == 0 {
				delete(m.queues, sid)
			} else {
				m.queues[sid] = q
			}
			return qt, i
		}
	}
	return nil, -1
}

// handOffLocked gives the session's free turn slot to the next queued
// turn, if one is ready and the server is not stopping, and returns
// what starts it (call it once m.mu is released); otherwise a no-op.
// m.mu is held.
func (m *Manager) handOffLocked(sid string) func() {
	q := m.queues[sid]
	if m.closing || m.turns[sid] != nil || len(q) == 0 || !q[0].ready {
		return func() {}
	}
	qt := q[0]
	m.removeQueuedLocked(sid, qt.id)
	t := &activeTurn{id: qt.id, done: make(chan struct{})}
	m.turns[sid] = t
	m.wg.Add(1) // the turn's; start's goroutine (or release) ends it
	return func() { go m.startQueued(t, qt) }
}

// startQueued starts queued turn qt, admitted as t: turn.started ends
// its wait. A session or workspace that is gone ends it with
// turn.cancelled (reason start_failed, phase queued) instead, and the
// next queued turn gets the slot.
func (m *Manager) startQueued(t *activeTurn, qt *queuedTurn) {
	ctx := context.Background()
	sid := qt.in.session.ID
	s, err := m.session(ctx, sid)
	if err == nil {
		var root *os.Root
		if root, err = os.OpenRoot(s.WorkspacePath); err == nil {
			root.Close()
		}
	}
	if err != nil {
		m.log.Warn("a queued turn could not start", "session", sid, "turn", qt.id, "err", err)
		if err := m.endQueued(ctx, qt, protocol.CancelReasonStartFailed); err != nil {
			m.log.Error("a queued turn's end was not stored", "session", sid, "turn", qt.id, "err", err)
		}
		m.release(sid, t, nil)
		return
	}
	in := qt.in
	in.session = s
	if err := m.start(ctx, t, in, store.EndQueuedTurn{TurnID: qt.id}); err != nil {
		// Not stored: the turn stays queued in the store and runs after
		// a restart.
		m.log.Error("a queued turn could not start", "session", sid, "turn", qt.id, "err", err)
	}
}

// endQueued ends queued turn qt with turn.cancelled(reason, phase
// queued), its only event since turn.queued, and a cancelled turn row.
func (m *Manager) endQueued(ctx context.Context, qt *queuedTurn, reason string) error {
	sid := qt.in.session.ID
	em, err := m.cfg.Bus.Emitter(ctx, sid)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	_, err = em.EmitWait(ctx, bus.Spec{Type: event.TurnCancelled, TurnID: qt.id, Actor: event.ActorSession,
		Payload: map[string]any{"reason": reason, "phase": protocol.TurnPhaseQueued, "cancelled_tool_use_ids": []string{}},
		Ops: []store.Op{store.EndQueuedTurn{TurnID: qt.id},
			store.PutTurn{Turn: store.Turn{ID: qt.id, SessionID: sid, Status: store.TurnCancelled, Reason: reason, StartedAt: qt.queuedAt, EndedAt: now}}}})
	return err
}

// cancelQueued cancels turn turnID if it waits in sessionID's queue
// (ok false otherwise): it leaves the queue and ends with
// turn.cancelled (phase queued) before the answer, Dequeued.
func (m *Manager) cancelQueued(ctx context.Context, sessionID, turnID, reason string) (CancelResult, bool, error) {
	m.mu.Lock()
	var qt *queuedTurn
	i := -1
	for j, x := range m.queues[sessionID] {
		if x.id == turnID && x.ready {
			qt, i = x, j
		}
	}
	if qt != nil {
		m.removeQueuedLocked(sessionID, turnID)
	}
	m.mu.Unlock()
	if qt == nil {
		return "", false, nil
	}
	if err := m.endQueued(ctx, qt, reason); err != nil {
		m.mu.Lock() // put it back where it was
		q := m.queues[sessionID]
		i = min(i, len(q))
		m.queues[sessionID] = append(q[:i:i], append([]*queuedTurn{qt}, q[i:]...)...)
		m.mu.Unlock()
		return "", true, fmt.Errorf("cancel queued turn %s: %w", turnID, err)
	}
	m.mu.Lock()
	next := m.handOffLocked(sessionID)
	m.mu.Unlock()
	next()
	return Dequeued, true, nil
}

// Dequeued answers the cancel of a queued turn.
const Dequeued = protocol.CancelDequeued

// resumeQueues reads back the turns that wait in queues (after a
// restart) and starts each idle session's next one.
func (m *Manager) resumeQueues(ctx context.Context) error {
	qs, err := m.cfg.Store.OpenQueuedTurns(ctx)
	if err != nil {
		return fmt.Errorf("resume queues: %w", err)
	}
	m.mu.Lock()
	known := map[string]bool{}
	for _, q := range m.queues {
		for _, qt := range q {
			known[qt.id] = true
		}
	}
	var sessions []string
	for _, r := range qs {
		if known[r.TurnID] {
			continue
		}
		if len(m.queues[r.SessionID]) == 0 {
			sessions = append(sessions, r.SessionID)
		}
		in := turnInput{session: store.Session{ID: r.SessionID}, text: r.Message.PlainText(), override: r.Model, user: r.Message}
		m.queues[r.SessionID] = append(m.queues[r.SessionID], &queuedTurn{id: r.TurnID, in: in, source: r.Source, queuedAt: r.QueuedAt, ready: true})
	}
	var starts []func()
	for _, sid := range sessions {
		starts = append(starts, m.handOffLocked(sid))
	}
	m.mu.Unlock()
	for _, start := range starts {
		start()
	}
	if len(qs) > 0 {
		m.log.Info("queued turns resumed", "turns", len(qs), "sessions", len(sessions))
	}
	return nil
}

// wireQueueLocked returns sid's queue as its summary lists it (ready
// turns only). m.mu is held.
func (m *Manager) wireQueueLocked(sid string) []protocol.QueuedTurn {
	var out []protocol.QueuedTurn
	for _, qt := range m.queues[sid] {
		if qt.ready {
			out = append(out, store.QueuedTurn{TurnID: qt.id, Message: qt.in.user, Source: qt.source, QueuedAt: qt.queuedAt}.Wire())
		}
	}
	return out
}
