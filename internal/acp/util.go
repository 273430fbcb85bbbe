package acp

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/metis-agent/metis/protocol"
)

// quote quotes s for an error message.
func quote(s string) string { return strconv.Quote(s) }

// validModelID reports whether s has the shape of a model id,
// provider:model, with no white space.
func validModelID(s string) bool {
	p, m, ok := strings.Cut(s, ":")
	return ok && p != "" && m != "" && !strings.ContainsAny(s, " \t\r\n")
}

// decodePayload decodes an event's payload.
func decodePayload(ev *protocol.EventEnvelope, v any) error { return json.Unmarshal(ev.Payload, v) }

// modelList is the server's list of usable models ("" entries never).
func (a *Agent) modelList(ctx context.Context) []string {
	_ = ctx
	return []string{"builtin:demo"}
}
