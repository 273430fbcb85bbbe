package api

import (
	"net/http"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/protocol"
)

// sessionRouted are the routed requests (clusterRouted) that change a
// session's running state, which only the owner of its tree holds: an
// answer to an approval request its turn waits on, the mode and cost
// limits its turns follow, a compaction by hand in its turn slot, and
// the session's own MCP servers, which its MCP manager runs (the GET
// too: the servers a session's turns use are the owner's to show), and
// a deletion, which holds the owner's turn slot and stops the
// background commands the owner runs (its record in the log removes
// the tree from every node's store).
func sessionRouted() map[string]routedRequest {
	mcpServers := func(set bool) routedRequest {
		return routedRequest{verb: cluster.KindMCP.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				req := cluster.MCPServersRequest{SessionID: r.PathValue("id"), Set: set}
				if r.Method == http.MethodPut {
					servers, ok := decodeMCPServers(w, r)
					if !ok {
						return nil, nil, false
					}
					req.Servers = servers
				}
				return req, new(protocol.MCPStatus), true
			},
			answer: answerOK}
	}
	return map[string]routedRequest{
		"POST /sessions/{id}/approvals/{approval_id}": {verb: cluster.KindApprove.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				var ans protocol.ApprovalAnswer
				if !decode(w, r, &ans, false) {
					return nil, nil, false
				}
				return cluster.ApproveRequest{SessionID: r.PathValue("id"), ApprovalID: r.PathValue("approval_id"), ApprovalAnswer: ans},
					new(protocol.ApprovalResolution), true
			},
			answer: answerOK},
		"PATCH /sessions/{id}": {verb: cluster.KindPatch.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				p, ok := decodePatch(w, r)
				if !ok {
					return nil, nil, false
				}
				return cluster.PatchRequest{SessionID: r.PathValue("id"), Mode: p.Mode, SessionBudgetPatch: p.SessionBudgetPatch,
						SessionEdit: p.SessionEdit},
					new(protocol.SessionSummary), true
			},
			answer: answerOK},
		"POST /sessions/{id}/compact": {verb: cluster.KindCompact.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				var req protocol.CompactRequest
				if !decode(w, r, &req, true) {
					return nil, nil, false
				}
				return cluster.CompactRequest{SessionID: r.PathValue("id"), Instructions: req.Instructions}, new(protocol.CompactAccepted), true
			},
			answer: func(w http.ResponseWriter, _ *http.Request, reply any) { WriteJSON(w, http.StatusAccepted, reply) }},
		"DELETE /sessions/{id}": {verb: cluster.KindDelete.Verb,
			decode: func(_ http.ResponseWriter, r *http.Request) (any, any, bool) {
				return cluster.DeleteRequest{SessionID: r.PathValue("id")}, new(cluster.DeleteReply), true
			},
			answer:  func(w http.ResponseWriter, _ *http.Request, _ any) { w.WriteHeader(http.StatusNoContent) },
			catchUp: true},
		"GET /sessions/{id}/mcp_servers":    mcpServers(false),
		"PUT /sessions/{id}/mcp_servers":    mcpServers(true),
		"DELETE /sessions/{id}/mcp_servers": mcpServers(true),
	}
}

// answerOK writes the owner's reply as the API's 200.
func answerOK(w http.ResponseWriter, _ *http.Request, reply any) { WriteJSON(w, http.StatusOK, reply) }

// remoteStatus is the status the API answers an owner's error code
// with (0: an internal error).
func remoteStatus(code string) int {
	switch code {
	case protocol.CodeSessionNotFound, protocol.CodeTurnNotFound, protocol.CodeMessageNotFound, protocol.CodeApprovalNotFound,
		protocol.CodeCheckpointNotFound:
		return http.StatusNotFound
	case protocol.CodeTurnInFlight, protocol.CodeApprovalResolved, protocol.CodeNothingToRevert, protocol.CodeCheckpointsUnavailable:
		return http.StatusConflict
	case protocol.CodeCheckpointFailed:
		return http.StatusInternalServerError
	case protocol.CodeInvalidRequest, "bad_request", protocol.CodeInvalidMode, protocol.CodeInvalidMCPServers,
		protocol.CodeWorkspaceForbidden, protocol.CodeWorkspaceHome:
		return http.StatusBadRequest
	case protocol.CodeShuttingDown, protocol.CodeOwnerUnavailable:
		return http.StatusServiceUnavailable
	}
	return 0
}
