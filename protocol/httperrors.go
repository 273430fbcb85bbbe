package protocol

import (
	"encoding/json"
	"net/http"
)

// Error codes of the HTTP API's JSON error body (contract §3). An edge
// refusing an HTTP request (the API, a stream upgrade, an SSE request)
// answers with one of these. Codes shared with the stream's frames
// (CodeSessionNotFound, CodeInvalidJSON, CodeInternal, and for SSE
// requests the subscribe error codes) are declared once, with them.
const (
	CodeTurnNotFound     = "turn_not_found"
	CodeMessageNotFound  = "message_not_found"
	CodeTurnInFlight     = "turn_in_flight"
	CodeInvalidRequest   = "invalid_request"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeBodyTooLarge     = "body_too_large"
	CodeRequestTimeout   = "request_timeout"
	CodeForbiddenOrigin  = "forbidden_origin"
	CodeForbiddenHost    = "forbidden_host"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeShuttingDown     = "shutting_down"
	// CodeUnauthorized answers a request without the bearer token a
	// server reachable from the network requires (401).
	CodeUnauthorized = "unauthorized"
	// CodeInvalidAttachToken answers a stream upgrade whose attach token
	// is missing, unknown, expired, used, or for another session (401).
	CodeInvalidAttachToken = "invalid_attach_token"
	// CodeOwnerUnavailable answers (503), in cluster mode, a turn
	// submission or cancel for a delegation tree that no node serves at
	// the moment (its owner just stopped and its lease has not expired
	// yet, or it is moving): the client may retry.
	CodeOwnerUnavailable = "owner_unavailable"
	// CodeInvalidMode answers (400) a mode that is not default,
	// accept_edits, plan or auto (POST /sessions, PATCH /sessions/{id}).
	CodeInvalidMode = "invalid_mode"
	// CodeApprovalNotFound answers (404) an approval id the session
	// (or, for a planner, its workers) never had.
	CodeApprovalNotFound = "approval_not_found"
	// CodeApprovalResolved answers (409) an approval already decided;
	// the body's resolution (ApprovalConflict) is the one that won.
	CodeApprovalResolved = "approval_resolved"
)

// HTTPError is the JSON body of every error answer of the HTTP API:
// {"error": {"code": "...", "message": "..."}}.
type HTTPError struct {
	Error HTTPErrorDetail `json:"error"`
}

// HTTPErrorDetail is the error object of an HTTPError.
type HTTPErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Offending is the filter entry an invalid_filter refusal of the SSE
	// stream names, as the subscribe_error's offending does.
	Offending string `json:"offending,omitempty"`
}

// WriteHTTPError answers with status and the JSON error body. The edges
// of the server use it for every refusal, so the body has one shape.
func WriteHTTPError(w http.ResponseWriter, status int, code, message string) {
	b, _ := json.Marshal(HTTPError{HTTPErrorDetail{Code: code, Message: message}}) // cannot fail: two strings
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
