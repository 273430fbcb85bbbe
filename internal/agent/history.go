package agent

import (
	"github.com/metis-agent/metis/internal/message"
)

// repairHistory makes a stored conversation valid to send to a model:
// assistant messages that were cancelled or failed (or whose turn
// stopped on a storage failure) keep their text and thinking but lose
// tool_use blocks that never got a result, and messages left empty are
// dropped. Providers reject a tool_use without its tool_result, and a
// cancelled turn is never resumed (spec §6.3). A tool_use is answered
// only by the tool message right after its assistant message: tool_use
// ids are the provider's and may repeat in later turns, so a later
// result with the same id answers nothing here.
//
// A failed assistant message that another assistant message follows, or
// that ends the conversation, is dropped whole: its call was made again
// (after the provider refused it as too long and the conversation was
// compacted), and its partial answer would otherwise run into the
// retry's, or be taken for the start of the answer to continue.
func repairHistory(ms []message.Message) []message.Message {
	out := make([]message.Message, 0, len(ms))
	for i, m := range ms {
		if m.Role == message.RoleAssistant && m.Status == message.StatusFailed &&
			(i+1 == len(ms) || ms[i+1].Role == message.RoleAssistant) {
			continue
		}
		if m.Role == message.RoleAssistant {
			answered := map[string]bool{}
			if i+1 < len(ms) && ms[i+1].Role == message.RoleTool {
				for _, b := range ms[i+1].Content {
					if b.Type == message.BlockToolResult {
						answered[b.ToolUseID] = true
					}
				}
			}
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
