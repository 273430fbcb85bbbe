package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Fork creates a session holding a session's conversation up to and
// including a message (all of it for ""), on the same workspace (POST
// /sessions/{id}/fork, contract §11). The new session, its messages,
// turns and tool calls, and its right to the images they refer to, are
// written in the transaction of its session.created, whose payload says
// where it came from; every id is new (messages, turns), and a
// compaction's references to messages follow them, so the model's view
// of the fork is the source's up to that message.
//
// The fork's permission mode is req.Mode, or the server's default mode
// as for any new session (the source's mode and session rules are not
// carried over: a fork starts careful).
//
// A tool round is never split: a fork at an assistant message that
// called tools also holds the message with their results. A fork of a
// worker is a session of its own (no parent). While a turn of the
// session runs, a fork of all of it, or at a message of that turn,
// fails with ErrTurnInFlight; a message that is not the session's
// fails with ErrNoMessage.
//
// With req.Checkpoint, the workspace's files are also put back as they
// were before the first turn the fork does not hold whole (a turn cut
// by the fork counts as not held): the checkpoint of the earliest such
// turn that took one is restored, as a revert does, and the fork's
// trace gets the workspace.reverted (nothing is restored when no such
// turn changed files). The workspace is shared with the source session:
// this changes its files too, and fails like Revert while a turn runs
// on the workspace (then nothing is created). A restore that fails once
// the fork exists is reported in the result's RestoreError.
func (m *Manager) Fork(ctx context.Context, sessionID string, req protocol.ForkRequest) (protocol.ForkResult, error) {
	src, err := m.session(ctx, sessionID)
	if err != nil {
		return protocol.ForkResult{}, err
	}
	m.mu.Lock()
	var running string
	if t := m.turns[sessionID]; t != nil {
		running = t.id
	}
	closing := m.closing
	m.mu.Unlock()
	if closing {
		return protocol.ForkResult{}, ErrClosed
	}
	if running != "" && req.MessageID == "" {
		return protocol.ForkResult{}, fmt.Errorf("%w: turn %s runs; fork at one of the messages before it (message_id)", ErrTurnInFlight, running)
	}
	conv, err := m.Conversation(ctx, sessionID)
	if err != nil {
		return protocol.ForkResult{}, err
	}
	upTo, err := forkPoint(conv, req.MessageID, sessionID)
	if err != nil {
		return protocol.ForkResult{}, err
	}
	kept := conv[:upTo]
	if running != "" && len(kept) > 0 && kept[len(kept)-1].TurnID == running {
		return protocol.ForkResult{}, fmt.Errorf("%w: message %s belongs to turn %s, which is still running", ErrTurnInFlight, req.MessageID, running)
	}
	lastID := ""
	if len(kept) > 0 {
		lastID = kept[len(kept)-1].ID
	}
	turns, err := m.allTurns(ctx, sessionID)
	if err != nil {
		return protocol.ForkResult{}, err
	}
	calls, err := m.cfg.Store.SessionToolCalls(ctx, sessionID)
	if err != nil {
		return protocol.ForkResult{}, err
	}
	mode := m.defaultMode() // a fork starts careful, as a new session does
	if req.Mode != "" {
		if _, err := permission.ParseMode(req.Mode); err != nil {
			return protocol.ForkResult{}, fmt.Errorf("%w: %v", ErrInvalidMode, err)
		}
		mode = permission.Mode(req.Mode)
	}
	target := ""
	if req.Checkpoint {
		if _, err := m.checkpoints(); err != nil {
			return protocol.ForkResult{}, err
		}
		target = restoreTargetOf(conv, upTo, turns)
	}

	now := time.Now().UTC()
	fork := store.Session{ID: event.NewID("sess_"), WorkspacePath: src.WorkspacePath, ActiveModel: src.ActiveModel,
		RoutingPolicyVersion: m.cfg.Router.Version(), CreatedAt: now, LastActivityAt: now, Title: src.Title,
		ContextWindow: src.ContextWindow, MaxTurnCostUSD: src.MaxTurnCostUSD, MaxSessionCostUSD: src.MaxSessionCostUSD,
		ForkedFromSessionID: sessionID, ForkedFromMessageID: lastID, Mode: string(mode)}
	ops, copiedTurns := forkOps(fork.ID, kept, conv, turns, calls)
	fork.TurnCount = copiedTurns
	ops = append([]store.Op{store.CreateSession{Session: fork}}, ops...)

	em, err := m.cfg.Bus.Attach(ctx, fork.ID, "")
	if err != nil {
		return protocol.ForkResult{}, err
	}
	// The fork's slot is held from before it exists until its files are
	// restored: no turn of it can start in between.
	var slot *activeTurn
	var root *os.Root
	if target != "" {
		if root, err = os.OpenRoot(src.WorkspacePath); err != nil {
			return protocol.ForkResult{}, fmt.Errorf("%w: workspace %s cannot be opened: %v", ErrInvalid, src.WorkspacePath, err)
		}
		slot = &activeTurn{id: event.NewID("rev_"), done: make(chan struct{})}
		if _, err := m.admit(ctx, fork.ID, slot, false); err != nil {
			root.Close()
			return protocol.ForkResult{}, err
		}
		defer m.releaser(fork.ID, slot, root)()
		if err := m.busyWorkspace(ctx, src.WorkspacePath, slot); err != nil {
			return protocol.ForkResult{}, err
		}
	}
	payload := protocol.SessionCreatedPayload{WorkspacePath: fork.WorkspacePath, Model: fork.ActiveModel,
		ForkedFrom: &protocol.ForkedFrom{SessionID: sessionID, MessageID: lastID}, Messages: len(kept), Mode: string(mode)}
	if _, err := em.EmitWait(ctx, bus.Spec{Type: event.SessionCreated, Actor: event.ActorSession, Payload: payload, Ops: ops}); err != nil {
		return protocol.ForkResult{}, fmt.Errorf("fork session %s: %w", sessionID, err)
	}
	m.log.Info("session forked", "session", sessionID, "fork", fork.ID, "message", lastID, "messages", len(kept), "turns", copiedTurns)
	sum, err := m.summaryOf(ctx, fork)
	if err != nil {
		sum = m.summarize(fork, nil, nil) // the fork exists: answer with what is known
	}
	out := protocol.ForkResult{SessionSummary: sum}
	if target == "" {
		return out, nil
	}
	res, err := m.restore(ctx, m.cfg.Checkpoints, em, src.WorkspacePath, target, protocol.RevertFork, "")
	if errors.Is(err, ErrNothingToRevert) {
		return out, nil // the files already are as they were then
	}
	if err != nil {
		m.log.Warn("fork: the files were not put back", "session", sessionID, "fork", fork.ID, "err", err)
		out.RestoreError = "the session was forked, but its files were not put back: " + err.Error()
		return out, nil
	}
	out.Restored = &res
	return out, nil
}

// forkPoint returns how many messages of conv a fork at messageID
// holds: through that message, and through the tool results that answer
// it when it called tools.
func forkPoint(conv []message.Message, messageID, sessionID string) (int, error) {
	if messageID == "" {
		return len(conv), nil
	}
	for i, msg := range conv {
		if msg.ID != messageID {
			continue
		}
		n := i + 1
		if msg.Role == message.RoleAssistant && hasToolUse(msg) && n < len(conv) && conv[n].Role == message.RoleTool {
			n++ // the round's results: a tool_use is never left without them
		}
		return n, nil
	}
	return 0, fmt.Errorf("%w: %q is not a message of session %s", ErrNoMessage, messageID, sessionID)
}

func hasToolUse(m message.Message) bool {
	for _, b := range m.Content {
		if b.Type == message.BlockToolUse {
			return true
		}
	}
	return false
}

// allTurns returns every turn row of a session, oldest first.
func (m *Manager) allTurns(ctx context.Context, sessionID string) ([]store.Turn, error) {
	var pages [][]store.Turn
	before := ""
	for {
		page, err := m.cfg.Store.SessionTurns(ctx, sessionID, before, MaxTurnPage)
		if err != nil {
			return nil, err
		}
		pages = append(pages, page.Turns)
		if !page.HasMore || len(page.Turns) == 0 {
			break
		}
		before = page.Turns[0].ID
	}
	var out []store.Turn
	for i := len(pages) - 1; i >= 0; i-- {
		out = append(out, pages[i]...)
	}
	return out, nil
}

// restoreTargetOf is the checkpoint a fork of conv[:upTo] with
// checkpoint restores: that of the earliest turn the fork does not hold
// whole (one with a message at or after the fork point) that took one
// ("" if none did).
func restoreTargetOf(conv []message.Message, upTo int, turns []store.Turn) string {
	notWhole := map[string]bool{}
	for _, msg := range conv[upTo:] {
		notWhole[msg.TurnID] = true
	}
	for _, t := range turns { // oldest first
		if notWhole[t.ID] && t.CheckpointID != "" {
			return t.CheckpointID
		}
	}
	return ""
}

// imagesOf returns the SHA-256 of every image msgs refer to (in user
// messages and in tool results), each once, in order.
func imagesOf(msgs []message.Message) []string {
	var out []string
	seen := map[string]bool{}
	for i := range msgs {
		for _, b := range msgs[i].Images() {
			if b.SHA256 != "" && !seen[b.SHA256] {
				seen[b.SHA256] = true
				out = append(out, b.SHA256)
			}
		}
	}
	return out
}

// forkOps copies messages (and the turns and tool calls they belong
// to) into session fork with new ids, gives the fork the right to the
// images they refer to (store.LinkImages: the bytes are stored once),
// and returns the ops and the number of turns copied. A turn cut by the fork keeps its checkpoint
// before, not its changes (which were the whole turn's).
func forkOps(fork string, kept, conv []message.Message, turns []store.Turn, calls []store.ToolCall) ([]store.Op, int) {
	msgIDs := make(map[string]string, len(kept))
	turnIDs := map[string]string{}
	for _, msg := range kept {
		msgIDs[msg.ID] = event.NewID("msg_")
		if msg.TurnID != "" && turnIDs[msg.TurnID] == "" {
			// A turn's id, or a compaction's (cmp_): a new one of its kind.
			prefix, _, _ := strings.Cut(msg.TurnID, "_")
			turnIDs[msg.TurnID] = event.NewID(prefix + "_")
		}
	}
	cut := map[string]bool{}
	for _, msg := range conv[len(kept):] {
		if turnIDs[msg.TurnID] != "" {
			cut[msg.TurnID] = true
		}
	}
	var ops []store.Op
	copied := 0
	for _, t := range turns {
		id := turnIDs[t.ID]
		if id == "" {
			continue
		}
		if cut[t.ID] {
			t.AfterCheckpointID, t.Changes = "", nil
		}
		t.ID, t.SessionID = id, fork
		if t.Status == store.TurnInFlight {
			t.Status, t.Reason, t.EndedAt = store.TurnCancelled, protocol.CancelReasonServerRestart, time.Now()
		}
		ops = append(ops, store.PutTurn{Turn: t})
		copied++
	}
	for _, msg := range kept {
		c := msg
		c.ID, c.SessionID, c.TurnID = msgIDs[msg.ID], fork, turnIDs[msg.TurnID]
		c.Content = make([]message.Block, len(msg.Content))
		for i, b := range msg.Content {
			if b.Compaction != nil {
				cb := *b.Compaction
				cb.CompactedThrough, cb.StubbedThrough = msgIDs[cb.CompactedThrough], msgIDs[cb.StubbedThrough]
				b.Compaction = &cb
			}
			c.Content[i] = b
		}
		ops = append(ops, store.PutMessage{Message: c})
	}
	if shas := imagesOf(kept); len(shas) > 0 {
		ops = append(ops, store.LinkImages{SessionID: fork, SHA256s: shas})
	}
	for _, call := range calls {
		mid := msgIDs[call.MessageID]
		if mid == "" {
			continue
		}
		call.SessionID, call.MessageID, call.TurnID = fork, mid, turnIDs[call.TurnID]
		ops = append(ops, store.PutToolCall{Call: call})
	}
	return ops, copied
}
