package session

import (
	"context"
	"errors"
	"fmt"
	"github.com/metis-agent/metis/internal/permission"
	"math"
	"os"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/compact"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Long sessions (docs/context.md): compaction by hand, the assembled
// system prompt, and the session's cost limits.

// sessionMode is the session's permission mode as the system prompt
// tells it (contract §7): every turn's and compaction's system prompt
// names it.
func sessionMode(s store.Session) string {
	if s.Mode == "" {
		return string(permission.ModeDefault)
	}
	return s.Mode
}

// Compact starts a compaction by hand of a session's conversation
// (POST /sessions/{id}/compact) and returns its id at once; the
// compaction runs in the background, summarising the conversation but
// its recent messages (instructions, optional, say what the summary must
// keep). It holds the session's turn slot while it runs: it fails with
// ErrTurnInFlight while a turn runs, and a turn submitted meanwhile gets
// ErrTurnInFlight. Its id answers cancels like a turn's (the
// summary shows it as current_turn_id), and shutdown cancels it.
func (m *Manager) Compact(ctx context.Context, sessionID, instructions string) (string, error) {
	if len(instructions) > compact.MaxInstructions {
		return "", fmt.Errorf("%w: instructions are %d bytes; the limit is %d", ErrInvalid, len(instructions), compact.MaxInstructions)
	}
	s, err := m.session(ctx, sessionID)
	if err != nil {
		return "", err
	}
	root, err := os.OpenRoot(s.WorkspacePath)
	if err != nil {
		return "", fmt.Errorf("%w: workspace %s cannot be opened: %v", ErrInvalid, s.WorkspacePath, err)
	}
	t := &activeTurn{id: event.NewID("cmp_"), done: make(chan struct{})}
	if _, err := m.admit(ctx, sessionID, t, false); err != nil {
		root.Close()
		return "", err
	}
	release := m.releaser(sessionID, t, root)
	em, err := m.cfg.Bus.Emitter(ctx, sessionID)
	if err != nil {
		release()
		return "", err
	}
	cctx, cancel := context.WithCancelCause(context.Background())
	m.mu.Lock()
	t.cancel = cancel
	if m.closing {
		t.cancelling, t.reason = true, agent.ReasonServerShutdown
		cancel(&agent.CancelCause{Reason: agent.ReasonServerShutdown})
	}
	m.mu.Unlock()
	go func() {
		defer release()
		defer cancel(nil)
		conv, err := m.Conversation(cctx, sessionID)
		if err != nil {
			m.log.Error("compaction: the conversation could not be read", "session", sessionID, "err", err)
			return
		}
		res := m.cfg.Loop.Compact(cctx, agent.CompactRequest{ID: t.id, SessionID: sessionID, Model: s.ActiveModel, Emitter: em,
			Conversation: conv, Instructions: instructions,
			Prompt: agent.PromptInput{Workspace: s.WorkspacePath, Root: root, Mode: sessionMode(s)}})
		if res.Message != nil {
			m.rememberHistory(sessionID, nil) // the next turn reads the compaction from the store
		}
		m.mu.Lock()
		t.ended = store.TurnCompleted
		if t.cancelling {
			t.ended = store.TurnCancelled
		}
		m.mu.Unlock()
		m.log.Info("compaction ended", "session", sessionID, "compaction", t.id, "stored", res.Message != nil, "class", res.Class)
	}()
	return t.id, nil
}

// SystemPrompt returns the system prompt the session's next model call
// sends, assembled now (GET /sessions/{id}/system-prompt).
func (m *Manager) SystemPrompt(ctx context.Context, sessionID string) (protocol.SystemPrompt, error) {
	s, err := m.session(ctx, sessionID)
	if err != nil {
		return protocol.SystemPrompt{}, err
	}
	root, err := os.OpenRoot(s.WorkspacePath)
	if err != nil {
		root = nil // the prompt is still shown, without the workspace's instructions
	} else {
		defer root.Close()
	}
	p := m.cfg.Loop.SystemPrompt(agent.PromptInput{Workspace: s.WorkspacePath, Root: root, Mode: sessionMode(s)})
	out := protocol.SystemPrompt{SessionID: s.ID, Text: p.Text, SHA256: p.SHA256, Sources: []protocol.PromptSource{}}
	for _, src := range p.Sources {
		out.Sources = append(out.Sources, protocol.PromptSource{Path: src.Path, Scope: src.Scope, Bytes: src.Bytes, Truncated: src.Truncated})
	}
	return out, nil
}

// MaxCostUSD bounds a cost limit a client may set.
const MaxCostUSD = 1e6

// SetBudget changes a session's cost limits (PATCH /sessions/{id}) and
// returns its summary. A limit must be a finite number from 0 (none) to
// MaxCostUSD; the change counts from the session's next turn.
func (m *Manager) SetBudget(ctx context.Context, sessionID string, p protocol.SessionBudgetPatch) (Summary, error) {
	for name, v := range map[string]*float64{"max_turn_cost_usd": p.MaxTurnCostUSD, "max_session_cost_usd": p.MaxSessionCostUSD} {
		if v != nil && (math.IsNaN(*v) || *v < 0 || *v > MaxCostUSD) {
			return Summary{}, fmt.Errorf("%w: %s must be a number from 0 (no limit) to %g", ErrInvalid, name, float64(MaxCostUSD))
		}
	}
	if _, err := m.session(ctx, sessionID); err != nil {
		return Summary{}, err
	}
	if p.MaxTurnCostUSD != nil || p.MaxSessionCostUSD != nil {
		em, err := m.cfg.Bus.Emitter(ctx, sessionID)
		if err != nil {
			return Summary{}, err
		}
		op := store.UpdateSession{ID: sessionID, Budget: &store.Budget{MaxTurnCostUSD: p.MaxTurnCostUSD, MaxSessionCostUSD: p.MaxSessionCostUSD}}
		if _, err := em.EmitWait(ctx, bus.Spec{Type: event.SessionBudgetChanged, Actor: event.ActorUser, Payload: p,
			Ops: []store.Op{op}}); err != nil {
			return Summary{}, fmt.Errorf("set the budget of session %s: %w", sessionID, err)
		}
	}
	return m.Get(ctx, sessionID)
}

// session reads a session row: ErrNotFound for an unknown one.
func (m *Manager) session(ctx context.Context, id string) (store.Session, error) {
	s, err := m.cfg.Store.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return s, err
}
