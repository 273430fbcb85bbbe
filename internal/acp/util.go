package acp

import (
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

// demoModel is the built-in offline model, which every server can use.
const demoModel = "builtin:demo"
