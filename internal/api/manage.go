package api

import (
	"net/http"
)

// deleteSession answers DELETE /sessions/{id}: the session and its
// workers are removed whole (204). A session with a turn in flight is
// 409 turn_in_flight; an unknown one 404 session_not_found.
func (a *API) deleteSession(w http.ResponseWriter, r *http.Request) {
	if err := a.sessions.Delete(r.Context(), r.PathValue("id")); err != nil {
		a.writeErr(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// models answers GET /models: the models sessions can be created with,
// the default first, and the providers that cannot be used, with why.
func (a *API) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.sessions.Models(r.Context()))
}
