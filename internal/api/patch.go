package api

import (
	"net/http"
	"strings"

	"github.com/metis-agent/metis/protocol"
)

// sessionPatch is the body of PATCH /sessions/{id}: every field is
// optional, and at least one must be there.
type sessionPatch struct {
	// Mode changes the session's permission mode (docs/permissions.md).
	Mode *string `json:"mode"`
	// The cost limits (docs/context.md, "Budgets").
	protocol.SessionBudgetPatch
	// The title and the archived mark.
	protocol.SessionEdit
}

// patchSession answers PATCH /sessions/{id}: it changes the fields the
// body holds (the mode, the cost limits, then the title and the archived
// mark) and answers 200 with the summary. A body with none of them is
// 400 invalid_request; a mode that is not one of the four is 400
// invalid_mode and changes nothing.
func (a *API) patchSession(w http.ResponseWriter, r *http.Request) {
	req, ok := decodePatch(w, r)
	if !ok {
		return
	}
	budget := req.MaxTurnCostUSD != nil || req.MaxSessionCostUSD != nil
	edit := req.Title != nil || req.Archived != nil
	var (
		s   protocol.SessionSummary
		err error
	)
	if req.Mode != nil {
		if s, err = a.sessions.SetMode(r.Context(), r.PathValue("id"), *req.Mode); err != nil {
			a.writeErr(w, r, err)
			return
		}
	}
	if budget {
		if s, err = a.sessions.SetBudget(r.Context(), r.PathValue("id"), req.SessionBudgetPatch); err != nil {
			a.writeErr(w, r, err)
			return
		}
	}
	if edit {
		if s, err = a.sessions.Edit(r.Context(), r.PathValue("id"), req.SessionEdit); err != nil {
			a.writeErr(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, s)
}

// decodePatch reads a PATCH /sessions/{id} body, refusing one with
// nothing to change or an empty title (the cluster front decodes it so
// too).
func decodePatch(w http.ResponseWriter, r *http.Request) (sessionPatch, bool) {
	var req sessionPatch
	if !decode(w, r, &req, false) {
		return req, false
	}
	if req.Mode == nil && req.MaxTurnCostUSD == nil && req.MaxSessionCostUSD == nil && req.Title == nil && req.Archived == nil {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest,
			`nothing to change: send "mode" (default, accept_edits, plan or auto), "max_turn_cost_usd", "max_session_cost_usd", "title" or "archived"`)
		return req, false
	}
	if req.Title != nil && strings.TrimSpace(*req.Title) == "" {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, `"title" is empty`)
		return req, false
	}
	return req, true
}
