package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/protocol"
)

// Checkpoints, revert and fork (docs/protocol.md, docs/conversation.md).
// GET /sessions/{id}/turns shares its path with POST (api.go).
func (a *API) checkpointRoutes() {
	a.route("/sessions/{id}/turns/{turn_id}/changes", map[string]http.HandlerFunc{"GET": a.turnChanges})
	a.route("/sessions/{id}/turns/{turn_id}/revert", map[string]http.HandlerFunc{"POST": a.revertTurn})
	a.route("/sessions/{id}/checkpoints/{checkpoint_id}/restore", map[string]http.HandlerFunc{"POST": a.restoreCheckpoint})
	a.route("/sessions/{id}/fork", map[string]http.HandlerFunc{"POST": a.fork})
}

func (a *API) listTurns(w http.ResponseWriter, r *http.Request) {
	before, limit, ok := turnPage(w, r)
	if !ok {
		return
	}
	list, err := a.sessions.Turns(r.Context(), r.PathValue("id"), before, limit)
	if err != nil {
		a.writeCheckpointErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// turnPage reads the page a turn listing asks for (?before=&limit=);
// a bad limit is answered with a 400, and ok is false.
func turnPage(w http.ResponseWriter, r *http.Request) (before string, limit int, ok bool) {
	q := r.URL.Query()
	limit = session.DefaultTurnPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > session.MaxTurnPage {
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "limit must be an integer from 1 to "+strconv.Itoa(session.MaxTurnPage))
			return "", 0, false
		}
		limit = n
	}
	return q.Get("before"), limit, true
}

func (a *API) turnChanges(w http.ResponseWriter, r *http.Request) {
	d, err := a.sessions.TurnChanges(r.Context(), r.PathValue("id"), r.PathValue("turn_id"))
	if err != nil {
		a.writeCheckpointErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *API) revertTurn(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if !decode(w, r, &req, true) {
		return
	}
	res, err := a.sessions.Revert(r.Context(), r.PathValue("id"), r.PathValue("turn_id"))
	if err != nil {
		a.writeCheckpointErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

func (a *API) restoreCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if !decode(w, r, &req, true) {
		return
	}
	res, err := a.sessions.RestoreCheckpoint(r.Context(), r.PathValue("id"), r.PathValue("checkpoint_id"))
	if err != nil {
		a.writeCheckpointErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

func (a *API) fork(w http.ResponseWriter, r *http.Request) {
	var req protocol.ForkRequest
	if !decode(w, r, &req, true) {
		return
	}
	res, err := a.sessions.Fork(r.Context(), r.PathValue("id"), req)
	if err != nil {
		a.writeCheckpointErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}

// writeCheckpointErr maps the errors of checkpoints, revert and fork,
// then the session manager's others.
func (a *API) writeCheckpointErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, session.ErrNothingToRevert):
		WriteError(w, http.StatusConflict, protocol.CodeNothingToRevert, err.Error())
	case errors.Is(err, session.ErrCheckpointsUnavailable):
		WriteError(w, http.StatusConflict, protocol.CodeCheckpointsUnavailable, err.Error())
	case errors.Is(err, session.ErrCheckpointNotFound):
		WriteError(w, http.StatusNotFound, protocol.CodeCheckpointNotFound, err.Error())
	case errors.Is(err, session.ErrCheckpointFailed):
		a.log.Error("checkpoint failed", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusInternalServerError, protocol.CodeCheckpointFailed, err.Error())
	default:
		a.writeErr(w, r, err)
	}
}
