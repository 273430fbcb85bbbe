package agent

import (
	"strconv"

	"github.com/metis-agent/metis/internal/event"
)

// toolIDs makes the tool_use ids of one assistant message unique before
// anything sees them. A model (or an OpenAI-compatible server) may send
// two tool calls with the same id, or none at all; the dispatcher, the
// tool call rows and the tool results sent back to the model all need
// one id per call. The rename happens when the call starts streaming, so
// the streaming events, message.complete, the tool.* events, the rows and
// the stored conversation all carry the same, renamed id (see
// docs/tool-dispatcher.md).
type toolIDs map[string]bool

// unique returns id if no earlier call of the message used it, otherwise
// id with the first free suffix "_dupN" (N from 2); an empty id gets a
// fresh metis id.
func (seen toolIDs) unique(id string) string {
	out := id
	if out == "" {
		out = event.NewID("call_metis_")
	}
	for n := 2; seen[out]; n++ {
		out = id + "_dup" + strconv.Itoa(n)
	}
	seen[out] = true
	return out
}
