package api

import (
	"net/http"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/protocol"
)

// checkpointRouted are the routed requests (clusterRouted) about a
// session's workspace checkpoints, which only the owner of its tree
// can answer: the checkpoints are in its checkpoint store, and it alone
// knows whether a turn runs (checkpoints.go has the single-node
// handlers). A fork runs on the owner too, so its new session's tree
// is the owner's.
func checkpointRouted() map[string]routedRequest {
	emptyBody := func(w http.ResponseWriter, r *http.Request) bool {
		var req struct{}
		return decode(w, r, &req, true)
	}
	reverted := func(w http.ResponseWriter, _ *http.Request, reply any) { WriteJSON(w, http.StatusAccepted, reply) }
	return map[string]routedRequest{
		"GET /sessions/{id}/turns": {verb: cluster.KindTurns.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				before, limit, ok := turnPage(w, r)
				if !ok {
					return nil, nil, false
				}
				return cluster.TurnsRequest{SessionID: r.PathValue("id"), Before: before, Limit: limit}, new(protocol.TurnList), true
			},
			answer: answerOK},
		"GET /sessions/{id}/turns/{turn_id}/changes": {verb: cluster.KindTurnChanges.Verb,
			decode: func(_ http.ResponseWriter, r *http.Request) (any, any, bool) {
				return cluster.TurnRequest{SessionID: r.PathValue("id"), TurnID: r.PathValue("turn_id")}, new(protocol.TurnDiff), true
			},
			answer: answerOK},
		"POST /sessions/{id}/turns/{turn_id}/revert": {verb: cluster.KindRevert.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				if !emptyBody(w, r) {
					return nil, nil, false
				}
				return cluster.TurnRequest{SessionID: r.PathValue("id"), TurnID: r.PathValue("turn_id")}, new(protocol.RevertResult), true
			},
			answer: reverted},
		"POST /sessions/{id}/checkpoints/{checkpoint_id}/restore": {verb: cluster.KindRestore.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				if !emptyBody(w, r) {
					return nil, nil, false
				}
				return cluster.RestoreRequest{SessionID: r.PathValue("id"), CheckpointID: r.PathValue("checkpoint_id")},
					new(protocol.RevertResult), true
			},
			answer: reverted},
		"POST /sessions/{id}/fork": {verb: cluster.KindFork.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				var req protocol.ForkRequest
				if !decode(w, r, &req, true) {
					return nil, nil, false
				}
				return cluster.ForkRequest{SessionID: r.PathValue("id"), ForkRequest: req}, new(protocol.ForkResult), true
			},
			answer: func(w http.ResponseWriter, _ *http.Request, reply any) { WriteJSON(w, http.StatusCreated, reply) }},
	}
}
