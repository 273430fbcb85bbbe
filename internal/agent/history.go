package agent

import (
	"github.com/metis-agent/metis/internal/message"
)

// repairHistory makes a stored conversation valid to send to a model:
// assistant messages that were cancelled or failed keep their text and
// thinking but lose tool_use blocks that never ran (no result follows
// them), and messages left empty are dropped. Providers reject a
// tool_use without its tool_result, and a cancelled turn is never
// resumed (spec §6.3).
func repairHistory(ms []message.Message) []message.Message {
	answered := map[string]bool{}
	for _, m := range ms {
		for _, b := range m.Content {
			if b.Type == message.BlockToolResult {
				answered[b.ToolUseID] = true
			}
		}
	}
	out := make([]message.Message, 0, len(ms))
	for _, m := range ms {
		if m.Role == message.RoleAssistant {
			kept := m.Content[:0:0]
			for _, b := range m.Content {
				if b.Type == message.BlockToolUse && !answered[b.ID] {
					continue
				}
				if (b.Type == message.BlockText && b.Text == "") || (b.Type == message.BlockThinking && b.Thinking == "") {
					continue
				}
				kept = append(kept, b)
			}
			m.Content = kept
		}
		if len(m.Content) == 0 {
			continue
		}
		out = append(out, m)
	}
	return out
}
