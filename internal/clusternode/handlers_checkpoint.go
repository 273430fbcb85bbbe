package clusternode

import (
	"context"
	"errors"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/protocol"
)

// The owner's side of the routed requests about a session's workspace
// checkpoints (cluster/route_checkpoint.go): the turn listing, a turn's
// changes, a revert, a restore and a fork. The checkpoints live in the
// owner's checkpoint store and only the owner knows whether a turn
// runs, so each is answered by its session manager, with the codes its
// API gives.

// Turns answers with a page of a session's turns as the owner sees
// them (revertible only when no turn runs there).
func (cn *Node) Turns(ctx context.Context, tree string, req cluster.TurnsRequest) (protocol.TurnList, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return protocol.TurnList{}, err
	}
	list, err := cn.sessions.Turns(ctx, req.SessionID, req.Before, req.Limit)
	return list, remoteCheckpointError(err)
}

// TurnChanges answers with the files a turn changed, with their diffs
// from the owner's checkpoints.
func (cn *Node) TurnChanges(ctx context.Context, tree string, req cluster.TurnRequest) (protocol.TurnDiff, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return protocol.TurnDiff{}, err
	}
	d, err := cn.sessions.TurnChanges(ctx, req.SessionID, req.TurnID)
	return d, remoteCheckpointError(err)
}

// Revert puts the session's workspace back as it was before a turn.
func (cn *Node) Revert(ctx context.Context, tree string, req cluster.TurnRequest) (protocol.RevertResult, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return protocol.RevertResult{}, err
	}
	res, err := cn.sessions.Revert(ctx, req.SessionID, req.TurnID)
	return res, remoteCheckpointError(err)
}

// Restore puts the session's workspace back to one of its checkpoints.
func (cn *Node) Restore(ctx context.Context, tree string, req cluster.RestoreRequest) (protocol.RevertResult, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return protocol.RevertResult{}, err
	}
	res, err := cn.sessions.RestoreCheckpoint(ctx, req.SessionID, req.CheckpointID)
	return res, remoteCheckpointError(err)
}

// Fork forks a session on the owner: the fork is a tree of its own,
// created (and so owned) by this node.
func (cn *Node) Fork(ctx context.Context, tree string, req cluster.ForkRequest) (protocol.ForkResult, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return protocol.ForkResult{}, err
	}
	res, err := cn.sessions.Fork(ctx, req.SessionID, req.ForkRequest)
	return res, remoteCheckpointError(err)
}

// remoteCheckpointError gives the errors of checkpoints, revert and
// fork the codes the API answers them with, then the session manager's
// others (remoteError); nil stays nil.
func remoteCheckpointError(err error) error {
	var code string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, session.ErrNothingToRevert):
		code = protocol.CodeNothingToRevert
	case errors.Is(err, session.ErrCheckpointsUnavailable):
		code = protocol.CodeCheckpointsUnavailable
	case errors.Is(err, session.ErrCheckpointNotFound):
		code = protocol.CodeCheckpointNotFound
	case errors.Is(err, session.ErrCheckpointFailed):
		code = protocol.CodeCheckpointFailed
	default:
		return remoteError(err)
	}
	return &cluster.RemoteError{Code: code, Message: err.Error()}
}
