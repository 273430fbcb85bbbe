package openai

import (
	"context"
	"testing"

	"github.com/metis-agent/metis/internal/model"
)

// TestIDlessToolCallsGetUniqueIDs: a compatible server that sends tool
// calls without ids gets a fresh id for every call, within one stream
// and across streams (turns): never the same fallback id twice.
func TestIDlessToolCallsGetUniqueIDs(t *testing.T) {
	chunk := func(delta map[string]any, finish any) string {
		return dataEvent(map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	call := func(i int, name string) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"index": i, "type": "function",
			"function": map[string]any{"name": name, "arguments": "{}"}}}}
	}
	h := serveEvents(chunk(call(0, "list_dir"), nil), chunk(call(1, "read_file"), nil), chunk(map[string]any{}, "tool_calls"), doneEvent)
	const turns = 3
	fs := newServer(t, h)
	a := fs.adapter(t, nil)
	seen := map[string]bool{}
	for turn := range turns {
		got, res, _, err := run(t, a, context.Background(), simpleReq())
		if err != nil || res.StopReason != model.StopToolUse {
			t.Fatalf("turn %d: %v %+v", turn, err, res)
		}
		n := 0
		for _, d := range got {
			if d.Kind != model.KindToolUseStart {
				continue
			}
			n++
			if d.ToolUseID == "" || seen[d.ToolUseID] {
				t.Fatalf("turn %d: tool call id %q empty or repeated (seen %v)", turn, d.ToolUseID, seen)
			}
			seen[d.ToolUseID] = true
		}
		if n != 2 {
			t.Fatalf("turn %d: %d tool calls, want 2: %s", turn, n, deltasString(got))
		}
	}
}
