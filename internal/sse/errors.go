package sse

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/metis-agent/metis/protocol"
)

// The HTTP API's error codes this edge answers with besides the
// subscribe's (the API's own table, docs/protocol.md).
const (
	codeInvalidRequest = "invalid_request"
	codeShuttingDown   = "shutting_down"
)

// errorBody is the API's JSON error body (contract §3), with the
// subscribe_error's offending filter entry when there is one.
type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Offending string `json:"offending,omitempty"`
	} `json:"error"`
}

// sentences joins two sentences.
func sentences(a, b string) string { return strings.TrimSuffix(a, ".") + ". " + b }

func writeError(w http.ResponseWriter, status int, code, msg, offending string) {
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.Offending = code, msg, offending
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}

// resnapshot is said after the refusals a client gets over by starting
// again from a snapshot.
const resnapshot = "Over SSE: reconnect with ?snapshot=true and no Last-Event-ID."

// refuse answers a refused subscribe with the status that fits its code.
func refuse(w http.ResponseWriter, serr *protocol.SubscribeError) {
	status, msg := http.StatusInternalServerError, serr.Message
	switch serr.Code {
	case protocol.CodeSessionNotFound:
		status = http.StatusNotFound
	case protocol.CodeInvalidFilter:
		status = http.StatusBadRequest
	case protocol.CodeInvalidCursor:
		status, msg = http.StatusBadRequest, sentences(msg, resnapshot)
	case protocol.CodeCursorExpired:
		status, msg = http.StatusGone, sentences(msg, resnapshot)
	case protocol.CodeReplayTooLarge:
		status, msg = http.StatusConflict, sentences(msg, resnapshot)
	}
	writeError(w, status, serr.Code, msg, serr.Offending)
}
