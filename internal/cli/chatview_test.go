package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/metis-agent/metis/client"
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

// TestChatViewCannotDriveTheTerminal: what the stream carries (a model's
// text, a command line, a tool's summary) reaches the terminal without
// its escape sequences and control characters; line breaks stay.
func TestChatViewCannotDriveTheTerminal(t *testing.T) {
	var out bytes.Buffer
	p := newChatPrinter(&out, "sess_a")
	ev := func(typ string, payload any) {
		raw, _ := json.Marshal(payload)
		p.event(&protocol.EventEnvelope{SessionID: "sess_a", Type: typ, Payload: raw})
	}
	ev("text.delta", map[string]any{"message_id": "m1", "text": "copy\x1b]52;c;cm0gLXJmIH4K\x07 this\n"})
	ev("approval.requested", map[string]any{"tool_name": "shell", "targets": []string{"rm -rf ~ \x1b[2K\recho hi"}, "reason": "asks"})
	ev("tool.completed", map[string]any{"tool_name": "shell", "summary": "exit 0 in 1ms\x1b[1A\x9b2J"})
	want := "copy this\n⏸ shell waits for approval: rm -rf ~ echo hi (asks) — answer in the TUI, the dashboard or metis send\n  ✓ exit 0 in 1ms\uFFFD2J\n" // the JSON encoder made the lone 0x9b U+FFFD
	if got := out.String(); got != want {
		t.Fatalf("printed %q\nwant    %q", got, want)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\n":             "plain\ttext\n",
		"\x1b[31mred\x1b[0m":        "red",
		"bell\x07 and \x00nul":      "bell and nul",
		"osc\x1b]0;title\x07 done":  "osc done",
		"c1 \u009b31m csi":          "c1 31m csi",
		"bad \xff\x9b utf-8":        "bad \uFFFD utf-8",
		"del\x7f and cr\r\nnewline": "del and cr\nnewline",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSendApprovalShowsTheWholeCommand: metis send's approval question
// (on the terminal) and its notes show a command made Printable.
func TestSendApprovalShowsTheWholeCommand(t *testing.T) {
	a := &approver{sid: "sess_a"}
	got := a.describe(client.PendingApproval{ToolName: "shell", Targets: []string{"rm -rf ~ \x1b[2K\recho hi"}})
	if got != "shell: rm -rf ~ echo hi" {
		t.Fatalf("describe = %q", got)
	}
	var errBuf bytes.Buffer
	printEvent(Env{Stderr: &errBuf, Stdout: io.Discard}, protocol.EventToolFailed,
		json.RawMessage(`{"tool_name":"read_file","error_class":"tool_error","message":"no \u001b]52;c;eA==\u0007file"}`))
	if got := errBuf.String(); got != "[tool read_file failed: tool_error: no file]\n" {
		t.Fatalf("note %q", got)
	}
}
