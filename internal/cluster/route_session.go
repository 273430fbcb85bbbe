package cluster

import (
	"github.com/metis-agent/metis/protocol"
)

// Routed requests that change a session's running state, which only
// the owner of its tree holds in memory: an answer to an approval
// request (the owner's turn waits on it), a change of mode or cost
// limits (the owner's turns follow it), a compaction by hand (it runs
// in the owner's turn slot) and the session's own MCP servers (the
// owner's MCP manager runs them), and a deletion (it holds the
// owner's turn slot and stops the owner's background commands).
// Subjects metis.rpc.<tree>.approve, .patch, .compact, .mcp_servers and
// .delete.
const (
	rpcApprove = "approve"
	rpcPatch   = "patch"
	rpcCompact = "compact"
	rpcMCP     = "mcp_servers"
	rpcDelete  = "delete"
)

// Kinds of routed request, as Router.Observe reports them.
const (
	RouteApprove = rpcApprove
	RoutePatch   = rpcPatch
	RouteCompact = rpcCompact
	RouteMCP     = rpcMCP
	RouteDelete  = rpcDelete
)

// The kinds of routed request about a session's running state.
var (
	KindApprove = Kind[ApproveRequest]{rpcApprove, DecodeApproveRequest}
	KindPatch   = Kind[PatchRequest]{rpcPatch, DecodePatchRequest}
	KindCompact = Kind[CompactRequest]{rpcCompact, DecodeCompactRequest}
	KindMCP     = Kind[MCPServersRequest]{rpcMCP, DecodeMCPServersRequest}
	KindDelete  = Kind[DeleteRequest]{rpcDelete, DecodeDeleteRequest}
)

// CodeApprovalResolved is the code of the owner's refusal of an answer
// to an approval request already decided: its Detail is the
// protocol.ApprovalResolution that won, which the asking node's API
// writes beside the error as the owner's would.
const CodeApprovalResolved = protocol.CodeApprovalResolved

// ApproveRequest asks the owner to answer an approval request of a
// session of its tree, or of one of the session's workers. The answer
// (decision, scope, reason) is the owner's session manager's to judge,
// so a refusal reads as it would on the owner. The reply is the
// protocol.ApprovalResolution that won.
type ApproveRequest struct {
	SessionID  string `json:"session_id"`
	ApprovalID string `json:"approval_id"`
	protocol.ApprovalAnswer
}

// PatchRequest asks the owner to change a session's mode and/or cost
// limits (PATCH /sessions/{id}), in that order, as its API does. The
// reply is the session's protocol.SessionSummary.
type PatchRequest struct {
	SessionID string  `json:"session_id"`
	Mode      *string `json:"mode,omitempty"`
	protocol.SessionBudgetPatch
	protocol.SessionEdit
}

// CompactRequest asks the owner to start a compaction by hand of a
// session's conversation. The reply is a protocol.CompactAccepted.
type CompactRequest struct {
	SessionID    string `json:"session_id"`
	Instructions string `json:"instructions,omitempty"`
}

// MCPServersRequest asks the owner for the MCP servers a session's
// turns use, after setting the session's own servers to Servers when
// Set is true (PUT; DELETE sets none). The reply is a
// protocol.MCPStatus.
type MCPServersRequest struct {
	SessionID string                     `json:"session_id"`
	Set       bool                       `json:"set,omitempty"`
	Servers   []protocol.MCPServerConfig `json:"servers,omitempty"`
}

// DeleteRequest asks the owner to delete a session and every worker
// below it (DELETE /sessions/{id}): the owner's session manager holds
// the session's turn slot while it deletes and stops the tree's
// background commands, which only the owner runs. The reply is a
// DeleteReply.
type DeleteRequest struct {
	SessionID string `json:"session_id"`
}

// DeleteReply answers a DeleteRequest the owner carried out.
type DeleteReply struct {
	Deleted bool `json:"deleted"`
}

// DecodeApproveRequest decodes and checks an approval's answer: a
// valid session id and an approval id. The answer itself is the
// owner's session manager's to judge.
func DecodeApproveRequest(b []byte) (ApproveRequest, error) {
	var r ApproveRequest
	if err := decodeSessionRequest(b, &r, r.session); err != nil {
		return r, err
	}
	if r.ApprovalID == "" {
		return r, &RemoteError{Code: "bad_request", Message: "empty approval_id"}
	}
	return r, nil
}

// DecodePatchRequest decodes and checks a session's patch: a valid
// session id and something to change. The values are the owner's
// session manager's to judge.
func DecodePatchRequest(b []byte) (PatchRequest, error) {
	var r PatchRequest
	if err := decodeSessionRequest(b, &r, r.session); err != nil {
		return r, err
	}
	if r.Mode == nil && r.MaxTurnCostUSD == nil && r.MaxSessionCostUSD == nil && r.Title == nil && r.Archived == nil {
		return r, &RemoteError{Code: "bad_request", Message: "nothing to change"}
	}
	return r, nil
}

// DecodeCompactRequest decodes and checks a compaction request: a
// valid session id (the instructions' length is the owner's to judge).
func DecodeCompactRequest(b []byte) (CompactRequest, error) {
	var r CompactRequest
	return r, decodeSessionRequest(b, &r, r.session)
}

// DecodeMCPServersRequest decodes and checks a request about a
// session's MCP servers: a valid session id, and servers only with Set
// (the servers themselves are the owner's MCP manager's to judge).
func DecodeMCPServersRequest(b []byte) (MCPServersRequest, error) {
	var r MCPServersRequest
	if err := decodeSessionRequest(b, &r, r.session); err != nil {
		return r, err
	}
	if !r.Set && len(r.Servers) > 0 {
		return r, &RemoteError{Code: "bad_request", Message: "servers without set"}
	}
	return r, nil
}

// DecodeDeleteRequest decodes and checks a deletion: a valid session
// id.
func DecodeDeleteRequest(b []byte) (DeleteRequest, error) {
	var r DeleteRequest
	return r, decodeSessionRequest(b, &r, r.session)
}

func (r *DeleteRequest) session() string     { return r.SessionID }
func (r *ApproveRequest) session() string    { return r.SessionID }
func (r *PatchRequest) session() string      { return r.SessionID }
func (r *CompactRequest) session() string    { return r.SessionID }
func (r *MCPServersRequest) session() string { return r.SessionID }

// decodeSessionRequest decodes a request about one session into v and
// checks the session id session reads from it.
func decodeSessionRequest(b []byte, v any, session func() string) error {
	if err := decodeRequest(b, v); err != nil {
		return err
	}
	if err := ValidToken(session()); err != nil {
		return &RemoteError{Code: "bad_request", Message: "session_id: " + err.Error()}
	}
	return nil
}
