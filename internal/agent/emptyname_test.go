package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/store"
)

// TestToolCallWithoutNameFailsVisibly: a tool_use with an empty name
// (an OpenAI-compatible server that never sent the function name) ends
// with tool.failed invalid_input, and the model gets an error result
// for it on the next call.
func TestToolCallWithoutNameFailsVisibly(t *testing.T) {
	var sent []message.Message // the history of the last model call
	q := &seq{scripts: []script{
		{deltas: []model.Delta{
			{Kind: model.KindToolUseStart, Index: 0, ToolUseID: "tu_nameless"},
			{Kind: model.KindToolInput, Index: 0, Text: `{"path": "."}`},
			{Kind: model.KindBlockStop, Index: 0},
		}, result: model.Result{StopReason: model.StopToolUse}},
		{deltas: []model.Delta{{Kind: model.KindText, Text: "done"}}, result: model.Result{StopReason: model.StopEndTurn}},
	}}
	rec := &recordingAdapter{inner: q, seen: &sent}
	r := newRig(t, rec)
	out, evs := r.run(context.Background(), "fake:m")
	if out.Status != store.TurnCompleted {
		t.Fatalf("outcome %+v", out)
	}
	failed := find(evs, event.ToolFailed)
	if len(failed) != 1 {
		t.Fatalf("tool.failed events: %d in %v", len(failed), types(evs))
	}
	if p := payload(t, failed[0]); p["tool_use_id"] != "tu_nameless" || p["error_class"] != "invalid_input" || !strings.Contains(p["message"].(string), "name") {
		t.Fatalf("tool.failed %v", p)
	}
	var result *message.Block
	for _, m := range sent {
		for i, b := range m.Content {
			if b.Type == message.BlockToolResult && b.ToolUseID == "tu_nameless" {
				result = &m.Content[i]
			}
		}
	}
	if result == nil || !result.IsError || !strings.Contains(result.Content, "name") {
		t.Fatalf("the model did not get an error result for the nameless call: %+v", result)
	}
}
