package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/metis-agent/metis/protocol"
)

// TestChatViewReadsAsAChat: metis tail's default view prints the user's
// message, the streamed text, a line per tool call and outcome (a
// non-zero exit as a failure, an edit's diff), approvals, workers of
// other sessions marked with their id, and the turn's end; never a raw
// delta or payload.
func TestChatViewReadsAsAChat(t *testing.T) {
	var out bytes.Buffer
	p := newChatPrinter(&out, "sess_a")
	ev := func(session, typ string, payload any) {
		raw, _ := json.Marshal(payload)
		p.event(&protocol.EventEnvelope{SessionID: session, Type: typ, Payload: raw})
	}
	ev("sess_a", "turn.started", map[string]any{"user_message": map[string]any{"content": []map[string]any{{"type": "text", "text": "fix it"}}}})
	ev("sess_a", "thinking.delta", map[string]any{"message_id": "m1", "text": "hmm"})
	ev("sess_a", "thinking.delta", map[string]any{"message_id": "m1", "text": " more"})
	ev("sess_a", "text.delta", map[string]any{"message_id": "m1", "text": "Running "})
	ev("sess_a", "text.delta", map[string]any{"message_id": "m1", "text": "the tests."})
	ev("sess_a", "tool.use_input_delta", map[string]any{"message_id": "m1", "partial_json": `{"comm`})
	ev("sess_a", "message.complete", map[string]any{"message_id": "m1"})
	ev("sess_a", "approval.requested", map[string]any{"tool_name": "shell", "targets": []string{"go test ./..."}, "reason": "the default mode asks"})
	ev("sess_a", "approval.resolved", map[string]any{"decision": "allow", "reason": "user"})
	ev("sess_a", "tool.called", map[string]any{"tool_name": "shell", "input": map[string]string{"command": "go test ./..."}})
	ev("sess_a", "tool.completed", map[string]any{"tool_name": "shell", "summary": "exit 1 in 2s", "result": "exit code: 1"})
	ev("sess_a", "tool.completed", map[string]any{"tool_name": "edit_file", "summary": "edited a.go", "diff": "--- a/a.go\n+++ b/a.go\n@@ -1 +1 @@\n-x\n+y\n"})
	ev("sess_w", "tool.called", map[string]any{"tool_name": "read_file", "input": map[string]string{"path": "b.go"}})
	ev("sess_a", "turn.completed", map[string]any{"outcome": "completed", "duration_ms": 2300,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.01}})
	want := `
› fix it
✻ thinking…
Running the tests.
⏸ shell waits for approval: go test ./... (the default mode asks) — answer in the TUI, the dashboard or metis send
  approval: allow (user)
▸ shell $ go test ./...
  ✗ exit 1 in 2s
  ✓ edited a.go
    --- a/a.go
    +++ b/a.go
    @@ -1 +1 @@
    -x
    +y
[sess_w] ▸ read_file {"path":"b.go"}
✓ done in 2.3s · 100 in · 20 out · $0.0100
`
	if got := out.String(); got != want {
		t.Fatalf("chat view:\n%s\nwant:\n%s", got, want)
	}
}
