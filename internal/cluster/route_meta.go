package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/metis-agent/metis/internal/event"
)

// Routed meta-events (metis.rpc.<tree>.meta). Only the owner of a tree
// emits into it, so a node serving a client of a tree owned elsewhere
// asks the owner to emit that client's meta-events: its
// bus.subscriber_registered and bus.subscriber_unregistered, and the
// bus.handler_warning of a slow client. The owner emits them with its
// own ids, in the tree's order, and every node's clients get them
// through the log.

// MetaRequest asks a tree's owner to emit a meta-event about a client
// of another node into one of the tree's sessions. Payload is the
// event's payload as the asking node built it (subscription_name, and
// a warning's reason and details).
type MetaRequest struct {
	SessionID string          `json:"session_id"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

// MetaReply answers a MetaRequest: the id the owner gave the event.
type MetaReply struct {
	EventID string `json:"event_id"`
}

// Bounds of a meta request: a whole request, and its subscription
// name and reason.
const (
	maxMetaRequest = 64 << 10
	maxMetaField   = 256
)

// Meta sends a meta-event to tree's owner, to emit.
func (r *Router) Meta(ctx context.Context, tree string, req MetaRequest) (MetaReply, error) {
	var out MetaReply
	err := r.Call(ctx, tree, rpcMeta, req, &out)
	return out, err
}

// DecodeMetaRequest decodes and checks a meta request body: a valid
// session id, one of the three subscription meta-event types, and a
// payload that is a JSON object naming the subscription (and, for a
// warning, its reason). The payload it returns is compact JSON with
// its keys sorted, as this process would have encoded it, so a body
// from the network never puts raw newlines or invalid UTF-8 in an
// event.
func DecodeMetaRequest(b []byte) (MetaRequest, error) {
	var r MetaRequest
	if len(b) > maxMetaRequest {
		return r, &RemoteError{Code: "bad_request", Message: fmt.Sprintf("meta request of %d bytes", len(b))}
	}
	if err := decodeRequest(b, &r); err != nil {
		return r, err
	}
	if err := ValidToken(r.SessionID); err != nil {
		return r, &RemoteError{Code: "bad_request", Message: "session_id: " + err.Error()}
	}
	typ := event.Type(r.Type)
	switch typ {
	case event.BusSubscriberRegistered, event.BusSubscriberUnregister, event.BusHandlerWarning:
	default:
		return r, &RemoteError{Code: "bad_request", Message: fmt.Sprintf("type %q is not a subscription meta-event", r.Type)}
	}
	var payload map[string]any
	d := json.NewDecoder(bytes.NewReader(r.Payload))
	d.UseNumber() // numbers encode again as they came
	if err := d.Decode(&payload); err != nil || payload == nil {
		return r, &RemoteError{Code: "bad_request", Message: "payload is not a JSON object"}
	}
	fields := []string{"subscription_name"}
	if typ == event.BusHandlerWarning {
		fields = append(fields, "reason")
	}
	for _, f := range fields {
		if v, _ := payload[f].(string); v == "" || len(v) > maxMetaField {
			return r, &RemoteError{Code: "bad_request", Message: fmt.Sprintf("payload: %s must be a string of 1 to %d bytes", f, maxMetaField)}
		}
	}
	canon, err := json.Marshal(payload)
	if err != nil {
		return r, &RemoteError{Code: "bad_request", Message: "payload: " + err.Error()}
	}
	r.Payload = canon
	return r, nil
}
