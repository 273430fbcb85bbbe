package api

import (
	"net/http"

	"github.com/metis-agent/metis/protocol"
)

// Long sessions (docs/context.md): compaction by hand, the assembled
// system prompt, and the session's cost limits.

// compact answers POST /sessions/{id}/compact: 202 with the
// compaction's id; the body is optional.
func (a *API) compact(w http.ResponseWriter, r *http.Request) {
	var req protocol.CompactRequest
	if !decode(w, r, &req, true) {
		return
	}
	id, err := a.sessions.Compact(r.Context(), r.PathValue("id"), req.Instructions)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, protocol.CompactAccepted{CompactionID: id})
}

// systemPrompt answers GET /sessions/{id}/system-prompt.
func (a *API) systemPrompt(w http.ResponseWriter, r *http.Request) {
	p, err := a.sessions.SystemPrompt(r.Context(), r.PathValue("id"))
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// patchSession answers PATCH /sessions/{id}: it changes the fields the
// body holds and answers with the summary. patchBudget handles the cost
// limits; a body with none of the fields it knows is refused.
func (a *API) patchSession(w http.ResponseWriter, r *http.Request) {
	var req protocol.SessionBudgetPatch
	if !decode(w, r, &req, false) {
		return
	}
	if req.MaxTurnCostUSD == nil && req.MaxSessionCostUSD == nil {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, `nothing to change: send "max_turn_cost_usd" or "max_session_cost_usd"`)
		return
	}
	a.patchBudget(w, r, req)
}

// patchBudget sets a session's cost limits.
func (a *API) patchBudget(w http.ResponseWriter, r *http.Request, req protocol.SessionBudgetPatch) {
	s, err := a.sessions.SetBudget(r.Context(), r.PathValue("id"), req)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}
