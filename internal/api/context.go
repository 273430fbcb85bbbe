package api

import (
	"net/http"

	"github.com/metis-agent/metis/protocol"
)

// Long sessions (docs/context.md): compaction by hand, the assembled
// system prompt (the cost limits are patch.go's, with the mode).

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
