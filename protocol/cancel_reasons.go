package protocol

// Reasons of turn.cancelled (TurnCancelledPayload.Reason) that the
// server itself gives. A client's cancel carries its own reason
// (CancelReasonUser when it gives none); the set is open: a client must
// accept any other string.
const (
	// CancelReasonUser: a client cancelled the turn without a reason.
	CancelReasonUser = "user_cancel"
	// CancelReasonServerShutdown: the server stopped (SIGINT/SIGTERM)
	// and cancelled every turn in flight before it exited.
	CancelReasonServerShutdown = "server_shutdown"
	// CancelReasonTurnTimeout: the turn ran longer than --turn-timeout.
	CancelReasonTurnTimeout = "turn_timeout"
	// CancelReasonServerRestart: the server crashed mid-turn; the turn
	// was ended (phase interrupted) when it started again.
	CancelReasonServerRestart = "server_restart"
	// CancelReasonOwnerLost: cluster mode; the node running the turn's
	// delegation tree died or lost the tree's lease mid-turn, and the
	// node that took the tree over ended the turn (phase interrupted).
	CancelReasonOwnerLost = "owner_lost"
)

// CancelPhaseInterrupted is the phase of a turn.cancelled that ended a
// turn its process could not finish (a crash, a lost owner, a storage
// failure after a cancel was accepted).
const CancelPhaseInterrupted = "interrupted"

// The other phases of turn.cancelled: where the turn was when the
// cancel landed.
const (
	// CancelPhaseLLM: the model was streaming.
	CancelPhaseLLM = "llm"
	// CancelPhaseSeam: the model had finished asking for tools and none
	// had started.
	CancelPhaseSeam = "seam"
	// CancelPhaseApproval: calls of the round were waiting for a user's
	// approval and none had started; the requests were denied (reason
	// cancelled) before the calls failed.
	CancelPhaseApproval = "approval"
	// CancelPhaseTools: tools were running.
	CancelPhaseTools = "tools"
	// CancelPhaseBetweenCalls: between model calls (or as the turn was
	// ending).
	CancelPhaseBetweenCalls = "between_calls"
)
