package streamtest

import (
	"encoding/json"

	"github.com/metis-agent/metis/protocol"
)

// DemoTurnChat is the collapsed (runs of one type folded, see Collapse)
// preset:chat sequence of a builtin:demo turn on a plain prompt:
// thinking, text and a list_dir call, then the final answer (spec §5.3's
// order).
var DemoTurnChat = []string{
	"turn.started", "route.decided",
	"llm.call_started", "message.start", "thinking.delta", "text.delta",
	"tool.use_start", "tool.use_input_delta", "tool.use_end", "message.complete", "llm.call_completed",
	"tool.called", "tool.completed",
	"llm.call_started", "message.start", "text.delta", "message.complete", "llm.call_completed",
	"turn.completed",
}

// DelegateCmd is a builtin:demo prompt that delegates task to a worker.
func DelegateCmd(task string) string {
	b, _ := json.Marshal(map[string]string{"task": task})
	return "/tool delegate " + string(b)
}

// SessionsOf counts events per session.
func SessionsOf(evs []*protocol.EventEnvelope) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		m[e.SessionID]++
	}
	return m
}
