package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/checkpoint"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Revert puts the workspace's files back as they were before a turn
// began (POST /sessions/{id}/turns/{turn_id}/revert, contract §11): the
// checkpoint the turn took before its first change is restored, so the
// changes of every later turn go too, and those of the workers its
// delegations ran. It holds the session's turn slot meanwhile, and
// emits workspace.reverted, whose undo_checkpoint_id undoes it
// (RestoreCheckpoint).
//
// It fails with ErrTurnNotFound for a turn of another session,
// ErrTurnInFlight while a turn of this session (or of another session
// on the same workspace, or one inside or around it) runs,
// ErrNothingToRevert for a turn that took no checkpoint (it ran no
// tool that could change files) or when the files already are as the
// checkpoint holds them, ErrCheckpointsUnavailable when checkpoints are
// off, ErrCheckpointNotFound when the checkpoint was collected, and
// ErrCheckpointFailed when the files could not be saved first (nothing
// was changed then).
func (m *Manager) Revert(ctx context.Context, sessionID, turnID string) (protocol.RevertResult, error) {
	t, err := m.storedTurn(ctx, sessionID, turnID)
	if err != nil {
		return protocol.RevertResult{}, err
	}
	return m.restoreHeld(ctx, sessionID, func(store.Session) (string, string, error) {
		if t.CheckpointID == "" {
			return "", "", fmt.Errorf("%w: turn %s ran no tool that could change files, so it took no checkpoint", ErrNothingToRevert, turnID)
		}
		return t.CheckpointID, protocol.RevertTurn, nil
	}, turnID)
}

// RestoreCheckpoint puts the workspace's files back as a checkpoint of
// the session holds them (POST
// /sessions/{id}/checkpoints/{checkpoint_id}/restore): the
// undo_checkpoint_id of one of its workspace.reverted events (undoing
// that revert), or the checkpoint before or after one of its turns. It
// fails as Revert does, and with ErrCheckpointNotFound for a
// checkpoint the session does not know.
func (m *Manager) RestoreCheckpoint(ctx context.Context, sessionID, checkpointID string) (protocol.RevertResult, error) {
	if _, err := m.session(ctx, sessionID); err != nil {
		return protocol.RevertResult{}, err
	}
	trigger, err := m.checkpointOf(ctx, sessionID, checkpointID)
	if err != nil {
		return protocol.RevertResult{}, err
	}
	return m.restoreHeld(ctx, sessionID, func(store.Session) (string, string, error) {
		return checkpointID, trigger, nil
	}, "")
}

// checkpointOf says how a session knows a checkpoint: RevertUndo for
// the undo checkpoint of one of its reverts, RevertTurn for a
// checkpoint of one of its turns; ErrCheckpointNotFound otherwise.
func (m *Manager) checkpointOf(ctx context.Context, sessionID, id string) (string, error) {
	if !checkpoint.ValidID(id) {
		return "", fmt.Errorf("%w: %q is not a checkpoint id", ErrCheckpointNotFound, id)
	}
	evs, err := m.cfg.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sessionID}, Types: []event.Type{event.WorkspaceReverted}})
	if err != nil {
		return "", err
	}
	for _, ev := range evs {
		var p protocol.RevertResult
		if json.Unmarshal(ev.Payload, &p) == nil && p.UndoCheckpointID == id {
			return protocol.RevertUndo, nil
		}
	}
	before := ""
	for {
		page, err := m.cfg.Store.SessionTurns(ctx, sessionID, before, MaxTurnPage)
		if err != nil {
			return "", err
		}
		for _, t := range page.Turns {
			if t.CheckpointID == id || t.AfterCheckpointID == id {
				return protocol.RevertTurn, nil
			}
		}
		if !page.HasMore || len(page.Turns) == 0 {
			break
		}
		before = page.Turns[0].ID
	}
	return "", fmt.Errorf("%w: %s is not a checkpoint of session %s (or the trace that named it has passed --retention)", ErrCheckpointNotFound, id, sessionID)
}

// restoreHeld holds the session's turn slot, checks that no turn runs
// on its workspace, asks pick for the checkpoint to restore and the
// trigger, restores it and emits workspace.reverted. turnID is the
// reverted turn ("" for none).
func (m *Manager) restoreHeld(ctx context.Context, sessionID string, pick func(store.Session) (string, string, error), turnID string) (protocol.RevertResult, error) {
	s, err := m.session(ctx, sessionID)
	if err != nil {
		return protocol.RevertResult{}, err
	}
	cs, err := m.checkpoints()
	if err != nil {
		return protocol.RevertResult{}, err
	}
	root, err := os.OpenRoot(s.WorkspacePath)
	if err != nil {
		return protocol.RevertResult{}, fmt.Errorf("%w: workspace %s cannot be opened: %v", ErrInvalid, s.WorkspacePath, err)
	}
	slot := &activeTurn{id: event.NewID("rev_"), done: make(chan struct{})}
	if _, err := m.admit(ctx, sessionID, slot, false); err != nil {
		root.Close()
		return protocol.RevertResult{}, err
	}
	defer m.releaser(sessionID, slot, root)()
	if err := m.busyWorkspace(ctx, s.WorkspacePath, slot); err != nil {
		return protocol.RevertResult{}, err
	}
	id, trigger, err := pick(s)
	if err != nil {
		return protocol.RevertResult{}, err
	}
	em, err := m.cfg.Bus.Emitter(ctx, sessionID)
	if err != nil {
		return protocol.RevertResult{}, err
	}
	return m.restore(ctx, cs, em, s.WorkspacePath, id, trigger, turnID)
}

// restore restores checkpoint id of workspace ws and emits
// workspace.reverted through em. The caller holds the turn slot.
func (m *Manager) restore(ctx context.Context, cs *checkpoint.Store, em *bus.Emitter, ws, id, trigger, turnID string) (protocol.RevertResult, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	res, err := cs.Restore(rctx, ws, id)
	switch {
	case errors.Is(err, checkpoint.ErrNothingToRestore):
		return protocol.RevertResult{}, fmt.Errorf("%w: the workspace's files already are as checkpoint %s holds them", ErrNothingToRevert, id)
	case errors.Is(err, checkpoint.ErrNotFound):
		return protocol.RevertResult{}, fmt.Errorf("%w: checkpoint %s is gone (collected, or its directory was removed)", ErrCheckpointNotFound, id)
	case err != nil && res.Undo.ID == "":
		return protocol.RevertResult{}, fmt.Errorf("%w: %v", ErrCheckpointFailed, err)
	case err != nil && len(res.Restored)+len(res.Removed) == 0:
		return protocol.RevertResult{}, fmt.Errorf("%w: nothing was changed: %v", ErrCheckpointFailed, err)
	}
	out := revertResult(res, trigger, turnID, id)
	if err != nil {
		// Cut short after it changed files: say what it did, and how.
		out.Failed = append(out.Failed, protocol.PathError{Path: ".", Message: err.Error()})
		m.log.Error("revert cut short", "workspace", ws, "checkpoint", id, "err", err)
	}
	if _, err := em.EmitWait(ctx, bus.Spec{Type: event.WorkspaceReverted, Actor: event.ActorUser, Payload: out}); err != nil {
		return out, fmt.Errorf("the files were put back but workspace.reverted could not be stored: %w", err)
	}
	m.log.Info("workspace reverted", "workspace", ws, "checkpoint", id, "trigger", trigger, "restored", len(res.Restored),
		"removed", len(res.Removed), "undo", res.Undo.ID, "duration", res.Duration)
	return out, nil
}

// revertResult is the wire form of a restore, each list cut at
// protocol.MaxListedPaths.
func revertResult(res checkpoint.Restored, trigger, turnID, id string) protocol.RevertResult {
	out := protocol.RevertResult{Trigger: trigger, TurnID: turnID, CheckpointID: id, UndoCheckpointID: res.Undo.ID,
		Restored: []string{}, Removed: []string{}, Warning: protocol.RevertWarning, DurationMS: res.Duration.Milliseconds()}
	cut := func(n int) int {
		if n > protocol.MaxListedPaths {
			out.Truncated = true
			return protocol.MaxListedPaths
		}
		return n
	}
	out.Restored = append(out.Restored, res.Restored[:cut(len(res.Restored))]...)
	out.Removed = append(out.Removed, res.Removed[:cut(len(res.Removed))]...)
	for _, s := range res.LeftAlone[:cut(len(res.LeftAlone))] {
		out.LeftAlone = append(out.LeftAlone, protocol.CheckpointSkip{Path: s.Path, Reason: s.Reason, Bytes: s.Bytes, Files: s.Files})
	}
	for _, f := range res.Failed[:cut(len(res.Failed))] {
		out.Failed = append(out.Failed, protocol.PathError{Path: f.Path, Message: f.Message})
	}
	return out
}
