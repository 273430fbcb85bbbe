package cluster

import (
	"github.com/metis-agent/metis/protocol"
)

// Routed requests about a session's workspace checkpoints, which only
// the owner of its tree can answer: its checkpoint store (a git
// directory under its metis home) holds them, and it alone knows
// whether a turn runs on the session (docs/conversation.md): the turn
// listing and a turn's changes, a revert, a restore of a checkpoint and
// a fork (the fork's new tree is the owner's). Subjects
// metis.rpc.<tree>.turns, .turn_changes, .revert, .restore and .fork.
const (
	rpcTurns       = "turns"
	rpcTurnChanges = "turn_changes"
	rpcRevert      = "revert"
	rpcRestore     = "restore"
	rpcFork        = "fork"
)

// Kinds of routed request, as Router.Observe reports them.
const (
	RouteTurns       = rpcTurns
	RouteTurnChanges = rpcTurnChanges
	RouteRevert      = rpcRevert
	RouteRestore     = rpcRestore
	RouteFork        = rpcFork
)

// The kinds of routed request about a session's checkpoints.
var (
	KindTurns       = Kind[TurnsRequest]{rpcTurns, DecodeTurnsRequest}
	KindTurnChanges = Kind[TurnRequest]{rpcTurnChanges, DecodeTurnRequest}
	KindRevert      = Kind[TurnRequest]{rpcRevert, DecodeTurnRequest}
	KindRestore     = Kind[RestoreRequest]{rpcRestore, DecodeRestoreRequest}
	KindFork        = Kind[ForkRequest]{rpcFork, DecodeForkRequest}
)

// TurnsRequest asks the owner for a page of a session's turns (GET
// /sessions/{id}/turns): up to Limit turns before the turn Before.
// The reply is a protocol.TurnList.
type TurnsRequest struct {
	SessionID string `json:"session_id"`
	Before    string `json:"before,omitempty"`
	Limit     int    `json:"limit"`
}

// TurnRequest asks the owner about one turn of a session: its changes
// (KindTurnChanges, replied with a protocol.TurnDiff) or its revert
// (KindRevert, replied with a protocol.RevertResult).
type TurnRequest struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
}

// RestoreRequest asks the owner to restore a checkpoint of a session
// (undoing a revert). The reply is a protocol.RevertResult.
type RestoreRequest struct {
	SessionID    string `json:"session_id"`
	CheckpointID string `json:"checkpoint_id"`
}

// ForkRequest asks the owner to fork a session. The reply is a
// protocol.ForkResult.
type ForkRequest struct {
	SessionID string `json:"session_id"`
	protocol.ForkRequest
}

// DecodeTurnsRequest decodes and checks a turn listing: a valid
// session id and a positive limit (its bound, and the turn id, are the
// owner's session manager's to judge).
func DecodeTurnsRequest(b []byte) (TurnsRequest, error) {
	var r TurnsRequest
	if err := decodeSessionRequest(b, &r, r.session); err != nil {
		return r, err
	}
	if r.Limit < 1 {
		return r, &RemoteError{Code: "bad_request", Message: "limit must be positive"}
	}
	return r, nil
}

// DecodeTurnRequest decodes and checks a request about a turn: a valid
// session id and a turn id.
func DecodeTurnRequest(b []byte) (TurnRequest, error) {
	var r TurnRequest
	if err := decodeSessionRequest(b, &r, r.session); err != nil {
		return r, err
	}
	if r.TurnID == "" {
		return r, &RemoteError{Code: "bad_request", Message: "empty turn_id"}
	}
	return r, nil
}

// DecodeRestoreRequest decodes and checks a restore: a valid session id
// and a checkpoint id.
func DecodeRestoreRequest(b []byte) (RestoreRequest, error) {
	var r RestoreRequest
	if err := decodeSessionRequest(b, &r, r.session); err != nil {
		return r, err
	}
	if r.CheckpointID == "" {
		return r, &RemoteError{Code: "bad_request", Message: "empty checkpoint_id"}
	}
	return r, nil
}

// DecodeForkRequest decodes and checks a fork: a valid session id (the
// message id and mode are the owner's session manager's to judge).
func DecodeForkRequest(b []byte) (ForkRequest, error) {
	var r ForkRequest
	return r, decodeSessionRequest(b, &r, r.session)
}

func (r *TurnsRequest) session() string   { return r.SessionID }
func (r *TurnRequest) session() string    { return r.SessionID }
func (r *RestoreRequest) session() string { return r.SessionID }
func (r *ForkRequest) session() string    { return r.SessionID }
