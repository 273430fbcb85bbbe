package compact

import (
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// Estimate returns the size in tokens of the request that sends view
// (the model's view of stored) with a system prompt and tools of fixed
// tokens. The provider's count is the truth: the newest assistant
// message of the view that was answered after the newest compaction
// carries its call's usage (input and cache tokens: the request; output
// tokens: the message itself), and only what the view holds after it is
// estimated from its bytes (model.EstimateMessageTokens). Without such a
// message, the whole view is estimated. Everything it reads is stored,
// so the estimate after a restart is the same.
func Estimate(stored, view []message.Message, fixed int) int {
	_, ci := Latest(stored)
	acc := 0
	for i := len(view) - 1; i >= 0; i-- {
		m := view[i]
		if u := m.Usage; m.Role == message.RoleAssistant && m.Status == message.StatusComplete && u != nil &&
			u.InputTokens+u.CacheReadTokens+u.CacheCreationTokens > 0 && after(stored, m.ID, ci) {
			return int(u.InputTokens+u.CacheReadTokens+u.CacheCreationTokens+u.OutputTokens) + acc
		}
		acc += model.EstimateMessageTokens(m.Content)
	}
	return fixed + acc + 1
}

// after reports whether message id is stored after index ci.
func after(stored []message.Message, id string, ci int) bool {
	if ci < 0 {
		return true
	}
	for i := len(stored) - 1; i > ci; i-- {
		if stored[i].ID == id {
			return true
		}
	}
	return false
}

// Tokens estimates a view from its bytes alone (no provider count): what
// a compaction's tokens_after is.
func Tokens(view []message.Message, fixed int) int {
	n := fixed + 1
	for _, m := range view {
		n += model.EstimateMessageTokens(m.Content)
	}
	return n
}
