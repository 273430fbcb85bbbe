package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/metis-agent/metis/internal/session"
)

// Error codes of the JSON error body.
const (
	CodeSessionNotFound  = "session_not_found"
	CodeTurnNotFound     = "turn_not_found"
	CodeMessageNotFound  = "message_not_found"
	CodeTurnInFlight     = "turn_in_flight"
	CodeInvalidRequest   = "invalid_request"
	CodeInvalidJSON      = "invalid_json"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeBodyTooLarge     = "body_too_large"
	CodeRequestTimeout   = "request_timeout"
	CodeForbiddenOrigin  = "forbidden_origin"
	CodeForbiddenHost    = "forbidden_host"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeShuttingDown     = "shutting_down"
	// CodeInvalidAttachToken answers a stream upgrade whose attach token
	// is missing, unknown, expired, used, or for another session (401).
	CodeInvalidAttachToken = "invalid_attach_token"
	CodeInternal           = "internal"
)

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError writes the JSON error body of contract §3.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{errorDetail{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		slog.Debug("write response", "err", err)
	}
}

// writeErr maps a session manager error to its status and code.
func (a *API) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, session.ErrNotFound):
		WriteError(w, http.StatusNotFound, CodeSessionNotFound, err.Error())
	case errors.Is(err, session.ErrTurnNotFound):
		WriteError(w, http.StatusNotFound, CodeTurnNotFound, err.Error())
	case errors.Is(err, session.ErrNoMessage):
		WriteError(w, http.StatusNotFound, CodeMessageNotFound, err.Error())
	case errors.Is(err, session.ErrTurnInFlight):
		WriteError(w, http.StatusConflict, CodeTurnInFlight, err.Error())
	case errors.Is(err, session.ErrInvalid):
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, err.Error())
	case errors.Is(err, session.ErrClosed):
		WriteError(w, http.StatusServiceUnavailable, CodeShuttingDown, err.Error())
	default:
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusInternalServerError, CodeInternal, "internal error; see the server log")
	}
}
