package api

import (
	"net/http"
	"strconv"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/protocol"
)

// submitTurn is POST /sessions/{id}/turns: a turn, queued or steered
// with images (docs/conversation.md). Its body may be larger than
// others' to carry the images (turnBodyLimit).
func (a *API) submitTurn(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Content *string `json:"content"`
		protocol.TurnRequest
	}
	if !decodeLimit(w, r, &req, false, a.turnBodyLimit()) {
		return
	}
	if req.Content == nil {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, `"content" is required`)
		return
	}
	req.TurnRequest.Content = *req.Content
	acc, err := a.sessions.SubmitTurn(r.Context(), r.PathValue("id"), req.TurnRequest)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, acc)
}

func (a *API) cancelTurn(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reason string `json:"reason"`
	}
	if !decode(w, r, &req, true) {
		return
	}
	if len(req.Reason) > 200 {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "reason is longer than 200 bytes")
		return
	}
	res, err := a.sessions.Cancel(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), req.Reason)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"turn_id": r.PathValue("turn_id"), "status": string(res)})
}

func (a *API) feedback(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Rating  string `json:"rating"`
		Comment string `json:"comment"`
	}
	if !decode(w, r, &req, false) {
		return
	}
	id, err := a.sessions.Feedback(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), req.Rating, req.Comment)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"event_id": id})
}

// Message page bounds.
const (
	defaultPage = 50
	maxPage     = 500
)

func (a *API) messages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPage {
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "limit must be an integer from 1 to "+strconv.Itoa(maxPage))
			return
		}
		limit = n
	}
	msgs, more, err := a.sessions.Messages(r.Context(), r.PathValue("id"), q.Get("before"), limit)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	if msgs == nil {
		msgs = []message.Message{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs, "has_more": more})
}
