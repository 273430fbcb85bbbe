package clusternode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/mcp"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/protocol"
)

// The owner's side of the routed requests that change a session's
// running state (cluster/route_session.go): the answer to an approval
// request its turn waits on, a change of mode or cost limits, a
// compaction by hand, the session's own MCP servers, and a deletion. Each is
// answered as the owner's API answers it, with the same codes.

// SessionMCP is what the owner needs of its MCP manager (internal/mcp's
// Manager) to answer the requests about a session's own MCP servers,
// which it runs for the session's turns.
type SessionMCP interface {
	SessionStatus(ctx context.Context, sessionID string) protocol.MCPStatus
	SetSessionServers(ctx context.Context, sessionID, workspace string, servers []protocol.MCPServerConfig) (protocol.MCPStatus, error)
}

// SetMCP gives the node the MCP manager its sessions' turns use; call
// it before the node answers routed requests (with SetSessions).
func (cn *Node) SetMCP(m SessionMCP) { cn.mcp = m }

// Approve answers an approval request routed from another node: the
// first answer wins, and a later one is refused with
// cluster.CodeApprovalResolved and the resolution that won.
func (cn *Node) Approve(ctx context.Context, tree string, req cluster.ApproveRequest) (protocol.ApprovalResolution, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return protocol.ApprovalResolution{}, err
	}
	res, err := cn.sessions.Approve(ctx, req.SessionID, req.ApprovalID, req.ApprovalAnswer)
	var resolved *session.ResolvedError
	if errors.As(err, &resolved) {
		detail, merr := json.Marshal(resolved.Res)
		if merr != nil {
			return protocol.ApprovalResolution{}, fmt.Errorf("approval %s: %w", req.ApprovalID, merr)
		}
		return protocol.ApprovalResolution{}, &cluster.RemoteError{Code: cluster.CodeApprovalResolved, Message: err.Error(), Detail: detail}
	}
	if err != nil {
		return protocol.ApprovalResolution{}, remoteError(err)
	}
	return res, nil
}

// Patch changes a session's mode, then its cost limits, then its title
// and archived mark, as PATCH /sessions/{id} does on the owner, and
// answers with its summary.
func (cn *Node) Patch(ctx context.Context, tree string, req cluster.PatchRequest) (protocol.SessionSummary, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return protocol.SessionSummary{}, err
	}
	var (
		s   protocol.SessionSummary
		err error
	)
	if req.Mode != nil {
		if s, err = cn.sessions.SetMode(ctx, req.SessionID, *req.Mode); err != nil {
			return protocol.SessionSummary{}, remoteError(err)
		}
	}
	if req.MaxTurnCostUSD != nil || req.MaxSessionCostUSD != nil {
		if s, err = cn.sessions.SetBudget(ctx, req.SessionID, req.SessionBudgetPatch); err != nil {
			return protocol.SessionSummary{}, remoteError(err)
		}
	}
	if req.Title != nil || req.Archived != nil {
		if s, err = cn.sessions.Edit(ctx, req.SessionID, req.SessionEdit); err != nil {
			return protocol.SessionSummary{}, remoteError(err)
		}
	}
	return s, nil
}

// Compact starts a compaction by hand of a session's conversation in
// the owner's turn slot.
func (cn *Node) Compact(ctx context.Context, tree string, req cluster.CompactRequest) (protocol.CompactAccepted, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return protocol.CompactAccepted{}, err
	}
	id, err := cn.sessions.Compact(ctx, req.SessionID, req.Instructions)
	if err != nil {
		return protocol.CompactAccepted{}, remoteError(err)
	}
	return protocol.CompactAccepted{CompactionID: id}, nil
}

// MCPServers answers with the MCP servers a session's turns use on the
// owner, after setting the session's own servers when req.Set.
func (cn *Node) MCPServers(ctx context.Context, tree string, req cluster.MCPServersRequest) (protocol.MCPStatus, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return protocol.MCPStatus{}, err
	}
	s, err := cn.sessions.Get(ctx, req.SessionID)
	if err != nil {
		return protocol.MCPStatus{}, remoteError(err)
	}
	if cn.mcp == nil {
		return protocol.MCPStatus{}, errors.New("cluster: the node has no MCP manager")
	}
	if !req.Set {
		return cn.mcp.SessionStatus(ctx, s.ID), nil
	}
	st, err := cn.mcp.SetSessionServers(ctx, s.ID, s.WorkspacePath, req.Servers)
	if err != nil {
		return protocol.MCPStatus{}, remoteError(err)
	}
	return st, nil
}

// Delete deletes a session and every worker below it on the owner, as
// DELETE /sessions/{id} does there: the owner holds the session's turn
// slot (a turn in flight is turn_in_flight) and stops the tree's
// background commands, which it alone runs.
func (cn *Node) Delete(ctx context.Context, tree string, req cluster.DeleteRequest) (cluster.DeleteReply, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return cluster.DeleteReply{}, err
	}
	if err := cn.sessions.Delete(ctx, req.SessionID); err != nil {
		return cluster.DeleteReply{}, remoteError(err)
	}
	return cluster.DeleteReply{Deleted: true}, nil
}

// mcpCode is the API's code of an MCP manager's error ("" none).
func mcpCode(err error) string {
	switch {
	case errors.Is(err, mcp.ErrInvalidServers):
		return protocol.CodeInvalidMCPServers
	case errors.Is(err, mcp.ErrClosed):
		return protocol.CodeShuttingDown
	}
	return ""
}
