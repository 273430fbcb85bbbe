package hub

import (
	"context"
	"encoding/json"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
)

// runningToolsAsOf returns the tool calls of the session's turn in flight
// that had started (tool.called) and not ended (tool.completed,
// tool.failed) at the seam, in the order they started: what a client
// cannot tell from the snapshot's messages, where a started call and one
// not yet started both read as a tool_use without a result.
//
// It reads the stored tool.* events only when the snapshot's messages
// hold such a call of the turn in flight (currentTurn), so a snapshot
// taken between tool calls costs no query.
func (h *Hub) runningToolsAsOf(ctx context.Context, sessionID, seam, currentTurn string, msgs []message.Message) ([]string, error) {
	if seam == "" || currentTurn == "" || !unansweredToolUse(msgs, currentTurn) {
		return nil, nil
	}
	var out []string
	err := h.store.ScanEvents(ctx, store.EventQuery{SessionIDs: []string{sessionID}, UpToID: seam, Types: toolCallTypes},
		func(r store.EventRow) error {
			var env struct {
				TurnID  string `json:"turn_id"`
				Payload struct {
					ToolUseID string `json:"tool_use_id"`
				} `json:"payload"`
			}
			if json.Unmarshal(r.Body, &env) != nil || env.Payload.ToolUseID == "" || env.TurnID != currentTurn {
				return nil // not readable, or another turn's
			}
			id := env.Payload.ToolUseID
			if r.Type == event.ToolCalled {
				out = append(out, id)
				return nil
			}
			for i, x := range out {
				if x == id {
					out = append(out[:i], out[i+1:]...)
					break
				}
			}
			return nil
		})
	return out, err
}

// unansweredToolUse reports whether msgs hold a tool_use block of turn
// with no tool_result for it.
func unansweredToolUse(msgs []message.Message, turn string) bool {
	asked := map[string]bool{}
	for _, m := range msgs {
		for _, b := range m.Content {
			switch {
			case b.Type == message.BlockToolUse && m.TurnID == turn:
				asked[b.ID] = true
			case b.Type == message.BlockToolResult:
				delete(asked, b.ToolUseID)
			}
		}
	}
	return len(asked) > 0
}
