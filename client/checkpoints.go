package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/metis-agent/metis/protocol"
)

// Checkpoints, revert and fork (docs/conversation.md): the turn list
// with what each turn changed, a turn's diffs, reverting a turn,
// undoing a revert, forking a session.

// TurnList is one page of GET /sessions/{id}/turns.
type TurnList = protocol.TurnList

// TurnInfo is one turn of a TurnList.
type TurnInfo = protocol.TurnInfo

// TurnDiff is what a turn changed, file by file, with unified diffs.
type TurnDiff = protocol.TurnDiff

// RevertResult is what a revert (or its undo, or a fork's restore) put
// back. Its Warning is protocol.RevertWarning: show it to the user.
type RevertResult = protocol.RevertResult

// ForkRequest is the body of a fork.
type ForkRequest = protocol.ForkRequest

// ForkResult is the answer of a fork: the new session's summary and
// what its restore did when it asked for the checkpoint.
type ForkResult = protocol.ForkResult

// Turns fetches one page of a session's turns, oldest first: up to
// limit turns (0: the server's default page) before the turn id before
// ("" for the newest). Each turn says whether it can be reverted and
// what files it changed; the page says whether the server takes
// checkpoints at all, and why not.
func (c *Client) Turns(ctx context.Context, sessionID, before string, limit int) (TurnList, error) {
	q := url.Values{}
	if before != "" {
		q.Set("before", before)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/sessions/" + url.PathEscape(sessionID) + "/turns"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l TurnList
	err := c.do(ctx, http.MethodGet, path, nil, &l)
	return l, err
}

// TurnChanges fetches the files a turn changed with their unified
// diffs (none for a turn that changed nothing or has not ended).
func (c *Client) TurnChanges(ctx context.Context, sessionID, turnID string) (TurnDiff, error) {
	var d TurnDiff
	err := c.do(ctx, http.MethodGet, turnPath(sessionID, turnID)+"/changes", nil, &d)
	return d, err
}

// Revert puts the workspace's files back as they were before a turn
// began, later turns' changes included. The result's UndoCheckpointID
// undoes it (RestoreCheckpoint). Commands' effects outside the files
// are not undone: show the result's Warning. A turn that changed
// nothing fails with a 409 nothing_to_revert (IsNothingToRevert), a
// busy session with a 409 turn_in_flight.
func (c *Client) Revert(ctx context.Context, sessionID, turnID string) (RevertResult, error) {
	var r RevertResult
	err := c.do(ctx, http.MethodPost, turnPath(sessionID, turnID)+"/revert", nil, &r)
	return r, err
}

// RestoreCheckpoint puts the workspace's files back as a checkpoint of
// the session holds them: the UndoCheckpointID of a revert (undoing
// it), or a turn's checkpoint.
func (c *Client) RestoreCheckpoint(ctx context.Context, sessionID, checkpointID string) (RevertResult, error) {
	var r RevertResult
	err := c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/checkpoints/"+url.PathEscape(checkpointID)+"/restore", nil, &r)
	return r, err
}

// Fork creates a session holding a session's conversation up to and
// including req.MessageID (all of it when ""), on the same workspace;
// with req.Checkpoint the workspace's files are also put back as they
// were at that message.
func (c *Client) Fork(ctx context.Context, sessionID string, req ForkRequest) (ForkResult, error) {
	var r ForkResult
	err := c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/fork", req, &r)
	return r, err
}

// IsNothingToRevert reports whether err is a 409 nothing_to_revert: the
// turn changed no file, or the files already are as it left them.
func IsNothingToRevert(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == protocol.CodeNothingToRevert
}

func turnPath(sessionID, turnID string) string {
	return "/sessions/" + url.PathEscape(sessionID) + "/turns/" + url.PathEscape(turnID)
}
