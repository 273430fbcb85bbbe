package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/metis-agent/metis/internal/checkpoint"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// Checkpointer takes the snapshots that bound a turn's changes to its
// workspace (docs/conversation.md, "Checkpoints and revert"); a
// *checkpoint.Store is one.
type Checkpointer interface {
	Snapshot(ctx context.Context, workspace string, kind checkpoint.Kind) (checkpoint.Checkpoint, error)
	Changes(ctx context.Context, workspace, from, to string) ([]checkpoint.Change, error)
}

// checkpointTimeout bounds a turn's snapshot. It runs to its end even
// when the turn is cancelled meanwhile: a snapshot cut short would leave
// the turn with no way back.
const checkpointTimeout = 5 * time.Minute

// mayChange reports whether a call of the tool named may change the
// workspace: every tool but those that say they only read it or fetch
// (kinds read and fetch: read_file, list_dir, glob, grep, web_fetch);
// edit_file, apply_patch, write_file, shell, delegate and external tools
// may. A name no tool has changes nothing (the call fails).
func (r *run) mayChange(name string) bool {
	t, ok := r.cfg.Tools.Get(name)
	if !ok {
		return false
	}
	switch tool.KindOf(t) {
	case tool.KindRead, tool.KindFetch:
		return false
	}
	return true
}

// checkpointBefore runs before call u starts (from the dispatcher's
// goroutine): before the turn's first call that may change the
// workspace, it saves the workspace's files and emits
// workspace.checkpointed with the checkpoint recorded on the turn's row,
// or workspace.checkpoint_failed. Workers take none: the planner's
// checkpoint, taken before its delegate call, covers their changes.
func (r *run) checkpointBefore(u message.Block) {
	if r.ckptTried || r.t.Worker || r.emitErr != nil || !r.mayChange(u.Name) {
		return
	}
	if r.cfg.Checkpoints == nil && r.cfg.CheckpointsUnavailable == "" {
		return // turned off
	}
	r.ckptTried = true
	if r.cfg.Checkpoints == nil {
		r.emit(event.WorkspaceCheckpointFailed, event.ActorAgent, protocol.WorkspaceCheckpointFailedPayload{
			ErrorClass: protocol.ClassCheckpointsUnavailable, Message: r.cfg.CheckpointsUnavailable})
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), checkpointTimeout)
	defer cancel()
	cp, err := r.cfg.Checkpoints.Snapshot(ctx, r.t.Workspace, checkpoint.KindTurn)
	if err != nil {
		r.cfg.Logger.Warn("checkpoint failed: the turn cannot be reverted", "session", r.t.SessionID, "turn", r.t.ID, "err", err)
		r.emit(event.WorkspaceCheckpointFailed, event.ActorAgent, protocol.WorkspaceCheckpointFailedPayload{
			ErrorClass: protocol.ClassCheckpointError, Message: err.Error()})
		return
	}
	row := store.PutTurn{Turn: store.Turn{ID: r.t.ID, SessionID: r.t.SessionID, Status: store.TurnInFlight,
		StartedAt: r.start, CheckpointID: cp.ID}}
	r.emit(event.WorkspaceCheckpointed, event.ActorAgent, protocol.WorkspaceCheckpointedPayload{CheckpointID: cp.ID,
		ToolUseID: u.ID, Staged: cp.Staged, Skipped: skipsOf(cp.Skipped), DurationMS: cp.Duration.Milliseconds()}, row)
	if r.emitErr == nil {
		r.ckpt = &cp
	}
}

// checkpointAfter runs as the turn ends, before its terminal event: if
// the turn saved a checkpoint, it saves the files again and emits
// workspace.changed with what the turn changed, recorded on its row.
func (r *run) checkpointAfter() {
	if r.ckpt == nil || r.emitErr != nil || r.ckptAfterDone {
		return
	}
	r.ckptAfterDone = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), checkpointTimeout)
	defer cancel()
	after, err := r.cfg.Checkpoints.Snapshot(ctx, r.t.Workspace, checkpoint.KindTurn)
	var cs []checkpoint.Change
	if err == nil {
		cs, err = r.cfg.Checkpoints.Changes(ctx, r.t.Workspace, r.ckpt.ID, after.ID)
	}
	if err != nil {
		r.cfg.Logger.Warn("checkpoint after the turn failed: its changes are not listed", "session", r.t.SessionID, "turn", r.t.ID, "err", err)
		r.emit(event.WorkspaceCheckpointFailed, event.ActorAgent, protocol.WorkspaceCheckpointFailedPayload{
			ErrorClass: protocol.ClassCheckpointError, Message: err.Error(), After: true})
		return
	}
	changes := TurnChanges(cs)
	raw, err := json.Marshal(changes)
	if err != nil {
		return // cannot happen: plain data
	}
	row := store.PutTurn{Turn: store.Turn{ID: r.t.ID, SessionID: r.t.SessionID, Status: store.TurnInFlight,
		StartedAt: r.start, AfterCheckpointID: after.ID, Changes: raw}}
	r.emit(event.WorkspaceChanged, event.ActorAgent, protocol.WorkspaceChangedPayload{CheckpointID: r.ckpt.ID,
		AfterCheckpointID: after.ID, TurnChanges: changes}, row)
}

// TurnChanges summarises the changes between two checkpoints for the
// wire: at most protocol.MaxListedChanges files, with the totals of all.
func TurnChanges(cs []checkpoint.Change) protocol.TurnChanges {
	out := protocol.TurnChanges{Files: []protocol.FileChange{}, FilesChanged: len(cs)}
	for i, c := range cs {
		out.Additions += c.Additions
		out.Deletions += c.Deletions
		if i >= protocol.MaxListedChanges {
			out.FilesTruncated = true
			continue
		}
		out.Files = append(out.Files, FileChangeOf(c))
	}
	return out
}

// FileChangeOf is one change as the wire shows it.
func FileChangeOf(c checkpoint.Change) protocol.FileChange {
	return protocol.FileChange{Path: c.Path, Status: c.Status, OldMode: c.OldMode, NewMode: c.NewMode,
		Additions: c.Additions, Deletions: c.Deletions, Binary: c.Binary}
}

// skipsOf is the wire form of what a checkpoint left out.
func skipsOf(ss []checkpoint.Skip) []protocol.CheckpointSkip {
	if len(ss) == 0 {
		return nil
	}
	out := make([]protocol.CheckpointSkip, len(ss))
	for i, s := range ss {
		out[i] = protocol.CheckpointSkip{Path: s.Path, Reason: s.Reason, Bytes: s.Bytes, Files: s.Files}
	}
	return out
}
