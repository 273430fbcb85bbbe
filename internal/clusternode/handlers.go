package clusternode

import (
	"context"
	"errors"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// The owner's side of routed requests (cluster.Handler): the requests
// of other nodes about a tree this node owns, answered with the
// session manager; and the stream's cancel frame, sent to a tree's
// owner wherever it runs.

// Submit implements cluster.Handler: a turn routed from another node.
func (cn *Node) Submit(ctx context.Context, tree string, req cluster.SubmitRequest) (cluster.SubmitReply, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return cluster.SubmitReply{}, err
	}
	id, err := cn.sessions.Submit(ctx, req.SessionID, req.Content)
	if err != nil {
		return cluster.SubmitReply{}, remoteError(err)
	}
	return cluster.SubmitReply{TurnID: id}, nil
}

// Cancel implements cluster.Handler: a cancel routed from another node.
func (cn *Node) Cancel(ctx context.Context, tree string, req cluster.CancelRequest) (cluster.CancelReply, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return cluster.CancelReply{}, err
	}
	res, err := cn.sessions.Cancel(ctx, req.SessionID, req.TurnID, req.Reason)
	if err != nil {
		return cluster.CancelReply{}, remoteError(err)
	}
	return cluster.CancelReply{Result: string(res)}, nil
}

// Feedback implements cluster.Handler: a turn's feedback routed from
// another node.
func (cn *Node) Feedback(ctx context.Context, tree string, req cluster.FeedbackRequest) (cluster.FeedbackReply, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return cluster.FeedbackReply{}, err
	}
	id, err := cn.sessions.Feedback(ctx, req.SessionID, req.TurnID, req.Rating, req.Comment)
	if err != nil {
		return cluster.FeedbackReply{}, remoteError(err)
	}
	return cluster.FeedbackReply{EventID: id}, nil
}

// inTree refuses a routed request for a session outside the tree it
// was sent to.
func (cn *Node) inTree(ctx context.Context, tree, sessionID string) error {
	got, err := cn.treeOf(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return &cluster.RemoteError{Code: protocol.CodeSessionNotFound, Message: "no session " + sessionID}
	}
	if err != nil {
		return err
	}
	if got != tree {
		return &cluster.RemoteError{Code: protocol.CodeInvalidRequest, Message: "session " + sessionID + " is not in tree " + tree}
	}
	return nil
}

// remoteError gives a session manager error the code the API answers
// it with, so the node that asked answers the same.
func remoteError(err error) error {
	code := mcpCode(err)
	switch {
	case code != "":
	case errors.Is(err, session.ErrNotFound):
		code = protocol.CodeSessionNotFound
	case errors.Is(err, session.ErrTurnNotFound):
		code = protocol.CodeTurnNotFound
	case errors.Is(err, session.ErrNoMessage):
		code = protocol.CodeMessageNotFound
	case errors.Is(err, session.ErrTurnInFlight):
		code = protocol.CodeTurnInFlight
	case errors.Is(err, session.ErrInvalidMode):
		code = protocol.CodeInvalidMode
	case errors.Is(err, session.ErrApprovalNotFound):
		code = protocol.CodeApprovalNotFound
	case errors.Is(err, session.ErrApprovalElsewhere):
		// A request a crash left waiting (recovery ends it): the
		// owner's own API answers it so.
		code = protocol.CodeOwnerUnavailable
	case errors.Is(err, session.ErrInvalid):
		code = protocol.CodeInvalidRequest
	case errors.Is(err, session.ErrClosed):
		code = protocol.CodeShuttingDown
	case errors.Is(err, bus.ErrMoved):
		// The tree moved to another node while the request ran.
		code = protocol.CodeOwnerUnavailable
	default:
		return err
	}
	return &cluster.RemoteError{Code: code, Message: err.Error()}
}

// Canceller is the stream's cancel frame handler in cluster mode: a
// cancel of a turn of a tree owned elsewhere goes to its owner, one of
// a tree this node owns (or an unknown session) to local.
type Canceller struct {
	cn    *Node
	local *session.Manager
}

// Canceller returns the stream's cancel frame handler.
func (cn *Node) Canceller(local *session.Manager) Canceller { return Canceller{cn: cn, local: local} }

// Cancel cancels a turn wherever its tree runs.
func (c Canceller) Cancel(ctx context.Context, sessionID, turnID, reason string) (session.CancelResult, error) {
	tree, err := c.cn.treeOf(ctx, sessionID)
	if err != nil || c.cn.owns(tree) {
		return c.local.Cancel(ctx, sessionID, turnID, reason)
	}
	var rep cluster.CancelReply
	err = c.cn.Forward(ctx, tree, cluster.KindCancel.Verb, cluster.CancelRequest{SessionID: sessionID, TurnID: turnID, Reason: reason}, &rep)
	if err != nil {
		return "", err
	}
	return session.CancelResult(rep.Result), nil
}
