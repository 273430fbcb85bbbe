package streamtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
)

// Anchors maps each message id to the id of the catalog event it was
// committed with, from a session's stored events: a user message with
// turn.started, an assistant message with llm.call_completed or
// llm.call_failed, a tool results message with the tool.completed or
// tool.failed of its last result. A snapshot as of event X holds
// exactly the messages whose anchor is <= X (see AsOf). It fails the
// test for a message without an anchor.
func Anchors(t testing.TB, stored []*event.Event, msgs []message.Message) map[string]string {
	t.Helper()
	byUser, byLLM, byTool := map[string]string{}, map[string]string{}, map[string]string{}
	for _, e := range stored {
		switch e.Type {
		case event.TurnStarted:
			p := EventPayloadOf[struct {
				UserMessage message.Message `json:"user_message"`
			}](t, e)
			byUser[p.UserMessage.ID] = e.ID
		case event.LLMCallCompleted, event.LLMCallFailed:
			byLLM[EventPayloadOf[LLMPayload](t, e).MessageID] = e.ID
		case event.ToolCompleted, event.ToolFailed:
			p := EventPayloadOf[struct {
				ToolUseID string `json:"tool_use_id"`
			}](t, e)
			byTool[e.TurnID+"/"+p.ToolUseID] = e.ID // builtin:demo reuses tool_use ids across turns
		}
	}
	out := map[string]string{}
	for _, m := range msgs {
		var a string
		switch m.Role {
		case message.RoleUser:
			a = byUser[m.ID]
		case message.RoleAssistant:
			a = byLLM[m.ID]
		case message.RoleTool:
			a = byTool[m.TurnID+"/"+m.Content[len(m.Content)-1].ToolUseID]
		}
		if a == "" {
			t.Fatalf("no anchor event for message %s (%s)", m.ID, m.Role)
		}
		out[m.ID] = a
	}
	return out
}

// AsOf returns the newest limit messages whose anchor is <= id, as
// JSON: what a snapshot as of id holds.
func AsOf(msgs []message.Message, anchor map[string]string, id string, limit int) []json.RawMessage {
	var out []json.RawMessage
	for _, m := range msgs {
		if anchor[m.ID] <= id {
			b, _ := json.Marshal(m)
			out = append(out, b)
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// MessageIDs describes a list of JSON messages as "role:id" words, for
// failure messages.
func MessageIDs(raw []json.RawMessage) string {
	var s []string
	for _, r := range raw {
		var m struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		}
		_ = json.Unmarshal(r, &m)
		s = append(s, m.Role+":"+m.ID)
	}
	return strings.Join(s, " ")
}
