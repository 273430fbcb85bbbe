package sse

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/metis-agent/metis/protocol"
)

// sentences joins two sentences.
func sentences(a, b string) string { return strings.TrimSuffix(a, ".") + ". " + b }

func writeError(w http.ResponseWriter, status int, code, msg, offending string) {
	b := protocol.HTTPError{Error: protocol.HTTPErrorDetail{Code: code, Message: msg, Offending: offending}}
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
