package api

import (
	"errors"
	"net/http"

	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/protocol"
)

// approve answers POST /sessions/{id}/approvals/{approval_id}: the
// first answer to a request wins (200 with its resolution); a later one
// is 409 approval_resolved with the resolution that won.
func (a *API) approve(w http.ResponseWriter, r *http.Request) {
	var ans protocol.ApprovalAnswer
	if !decode(w, r, &ans, false) {
		return
	}
	res, err := a.sessions.Approve(r.Context(), r.PathValue("id"), r.PathValue("approval_id"), ans)
	var resolved *session.ResolvedError
	if errors.As(err, &resolved) {
		writeJSON(w, http.StatusConflict, protocol.ApprovalConflict{
			Error:      protocol.HTTPErrorDetail{Code: protocol.CodeApprovalResolved, Message: err.Error()},
			Resolution: resolved.Res})
		return
	}
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
