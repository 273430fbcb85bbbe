package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/protocol"
)

// Error codes of the JSON error body; they are part of the wire
// vocabulary, declared in protocol.
const (
	CodeSessionNotFound    = protocol.CodeSessionNotFound
	CodeTurnNotFound       = protocol.CodeTurnNotFound
	CodeMessageNotFound    = protocol.CodeMessageNotFound
	CodeTurnInFlight       = protocol.CodeTurnInFlight
	CodeInvalidRequest     = protocol.CodeInvalidRequest
	CodeInvalidJSON        = protocol.CodeInvalidJSON
	CodeUnsupportedMedia   = protocol.CodeUnsupportedMedia
	CodeBodyTooLarge       = protocol.CodeBodyTooLarge
	CodeRequestTimeout     = protocol.CodeRequestTimeout
	CodeForbiddenOrigin    = protocol.CodeForbiddenOrigin
	CodeForbiddenHost      = protocol.CodeForbiddenHost
	CodeNotFound           = protocol.CodeNotFound
	CodeMethodNotAllowed   = protocol.CodeMethodNotAllowed
	CodeShuttingDown       = protocol.CodeShuttingDown
	CodeInvalidAttachToken = protocol.CodeInvalidAttachToken
	CodeInternal           = protocol.CodeInternal
	CodeWorkspaceForbidden = protocol.CodeWorkspaceForbidden
	CodeWorkspaceHome      = protocol.CodeWorkspaceHome
)

// WriteError writes the JSON error body of contract §3.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	protocol.WriteHTTPError(w, status, code, msg)
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
	case errors.Is(err, session.ErrInvalidMode):
		WriteError(w, http.StatusBadRequest, protocol.CodeInvalidMode, err.Error())
	case errors.Is(err, session.ErrApprovalNotFound):
		WriteError(w, http.StatusNotFound, protocol.CodeApprovalNotFound, err.Error())
	case errors.Is(err, session.ErrApprovalElsewhere):
		WriteError(w, http.StatusServiceUnavailable, protocol.CodeOwnerUnavailable, err.Error())
	case errors.Is(err, session.ErrInvalid):
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, err.Error())
	case errors.Is(err, session.ErrWorkspaceForbidden):
		WriteError(w, http.StatusBadRequest, CodeWorkspaceForbidden, err.Error())
	case errors.Is(err, session.ErrWorkspaceHome):
		WriteError(w, http.StatusBadRequest, CodeWorkspaceHome, err.Error())
	case errors.Is(err, session.ErrClosed):
		WriteError(w, http.StatusServiceUnavailable, CodeShuttingDown, err.Error())
	case errors.Is(err, bus.ErrMoved):
		// Cluster mode: this node lost the session's tree while the
		// request ran; another node runs it now.
		a.log.Info("request refused: the session's tree moved to another node", "method", r.Method, "path", r.URL.Path)
		WriteError(w, http.StatusServiceUnavailable, protocol.CodeOwnerUnavailable, "this session's tree moved to another node while the request ran; retry")
	default:
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusInternalServerError, CodeInternal, "internal error; see the server log")
	}
}
