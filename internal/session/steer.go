package session

import (
	"context"
	"fmt"
	"strings"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Steering (docs/conversation.md): a message sent with steer while a
// turn runs waits in the turn's inbox; the agent loop takes it at its
// next model-call boundary (agent.Turn.Steer), emits turn.steered and
// stores it as a user message of the turn, so the next call sees it. A
// turn that ends first (its end fixed, no further call) leaves what its
// inbox holds to the queue: each message becomes a queued turn of its
// own (turn.queued, source steer), at the end of the queue.

// steer puts in into the running turn's inbox. ok is false when no
// turn can take it (none runs, a compaction holds the slot, or the turn
// is ending): the caller queues it or starts a turn. A turn being
// cancelled refuses it (ErrTurnCancelling); expected, when set, must
// be the running turn (ErrTurnMismatch).
func (m *Manager) steer(sessionID string, in turnInput, expected string) (protocol.TurnAccepted, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.turns[sessionID]
	if expected != "" && (cur == nil || cur.id != expected) {
		running := "no turn"
		if cur != nil {
			running = cur.id
		}
		return protocol.TurnAccepted{}, false, fmt.Errorf("%w: expected %s, running %s", ErrTurnMismatch, expected, running)
	}
	if cur == nil || strings.HasPrefix(cur.id, compactionPrefix) || cur.ended != "" {
		return protocol.TurnAccepted{}, false, nil
	}
	switch {
	case cur.cancelling:
		return protocol.TurnAccepted{}, false, fmt.Errorf("%w: turn %s; send the message with queue to run it after", ErrTurnCancelling, cur.id)
	case in.override != "":
		return protocol.TurnAccepted{}, false, fmt.Errorf("%w: /model cannot change the model of a running turn; queue the message instead", ErrInvalid)
	case len(cur.inbox) >= m.cfg.MaxQueuedTurns:
		return protocol.TurnAccepted{}, false, fmt.Errorf("%w: %d messages wait for turn %s already", ErrQueueFull, len(cur.inbox), cur.id)
	}
	in.user.TurnID = cur.id
	cur.inbox = append(cur.inbox, in)
	return protocol.TurnAccepted{TurnID: cur.id, Steered: true, MessageID: in.user.ID}, true, nil
}

// compactionPrefix starts the id of a compaction by hand, which holds a
// session's slot like a turn but makes no model call a message could
// enter.
const compactionPrefix = "cmp_"

// steered is turn t's agent.Turn.Steer: it hands the loop the messages
// steered into t since the last call, with the ops that store their
// images, and empties the inbox. Once t's end is fixed it hands nothing
// (the messages are queued instead).
func (m *Manager) steered(t *activeTurn) []agent.Steered {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.ended != "" || len(t.inbox) == 0 {
		return nil
	}
	out := make([]agent.Steered, 0, len(t.inbox))
	for _, in := range t.inbox {
		s := agent.Steered{Message: in.user}
		if len(in.images) > 0 {
			s.Ops = []store.Op{store.PutImages{SessionID: in.session.ID, Images: in.images}}
		}
		out = append(out, s)
	}
	t.inbox = nil
	return out
}

// queueLate queues the messages steered into a turn that ended before
// taking them, in the order they came.
func (m *Manager) queueLate(sessionID string, late []turnInput) {
	for _, in := range late {
		in.user.TurnID = ""
		if _, err := m.enqueue(context.Background(), in, protocol.QueueSourceSteer, false); err != nil {
			m.log.Error("a steered message was lost: its turn ended and it could not be queued",
				"session", sessionID, "message", in.user.ID, "err", err)
		}
	}
}
