package tui

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

var (
	esc      = tea.KeyPressMsg{Code: tea.KeyEscape}
	f1       = tea.KeyPressMsg{Code: tea.KeyF1}
	shiftTab = tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
)

// typeText types s into the model, key by key.
func (h *harness) typeText(s string) {
	for _, r := range s {
		h.key(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// run runs a command the model returned and feeds its message back, as
// the program would.
func (h *harness) run(cmd tea.Cmd) tea.Msg {
	h.t.Helper()
	if cmd == nil {
		h.t.Fatal("no command")
	}
	msg := cmd()
	h.m.Update(msg)
	return msg
}

func TestHelpOverlayOpensOnQuestionMarkF1AndSlashHelp(t *testing.T) {
	h := newHarness(t)
	h.key(tea.KeyPressMsg{Code: '?', Text: "?"})
	h.contains("metis — help", "/sessions", "esc", "cancel the running turn")
	if h.m.composer.Value() != "" {
		t.Fatalf("? on an empty input was typed: %q", h.m.composer.Value())
	}
	h.key(esc)
	h.lacks("metis — help")

	// With text in the input, ? is a character.
	h.typeText("what?")
	h.lacks("metis — help")
	if got := h.m.composer.Value(); got != "what?" {
		t.Fatalf("composer %q", got)
	}
	h.m.composer.Reset()

	h.key(f1)
	h.contains("metis — help")
	h.key(f1)
	h.lacks("metis — help")

	h.typeText("/help")
	h.key(enter)
	h.contains("metis — help")
	if len(h.api.submitted) != 0 {
		t.Fatalf("/help was sent to the model: %q", h.api.submitted)
	}
}

func TestSlashCommandsAreHandledLocally(t *testing.T) {
	h := newHarness(t)
	h.typeText("/mode plan")
	msg := h.run(h.key(enter))
	if ms, ok := msg.(modeSetMsg); !ok || ms.err != nil {
		t.Fatalf("/mode plan answered %#v", msg)
	}
	h.contains("mode plan")

	h.typeText("/compact keep the test names")
	h.run(h.key(enter))
	h.typeText("/model anthropic:claude-sonnet-4-6")
	h.key(enter)
	h.contains("anthropic:claude-sonnet-4-6")
	h.typeText("/undo")
	h.run(h.key(enter))
	h.contains("nothing to revert")
	if len(h.api.submitted) != 0 {
		t.Fatalf("local commands were sent to the model: %q", h.api.submitted)
	}
	if len(h.api.modes) != 1 || h.api.modes[0] != "plan" {
		t.Fatalf("modes %q", h.api.modes)
	}
	if len(h.api.compacts) != 1 || h.api.compacts[0] != "keep the test names" {
		t.Fatalf("compacts %q", h.api.compacts)
	}

	// Other slash text is the model's (the demo's /echo); the pinned
	// model goes with it.
	h.typeText("/echo hi")
	h.run(h.key(enter))
	if len(h.api.submitted) != 1 || h.api.submitted[0] != "/model anthropic:claude-sonnet-4-6 /echo hi" {
		t.Fatalf("submitted %q", h.api.submitted)
	}
}

func TestShiftTabCyclesTheMode(t *testing.T) {
	h := newHarness(t)
	h.contains("mode default")
	h.run(h.key(shiftTab))
	h.event("session.mode_changed", "", map[string]any{"mode": "accept_edits"})
	h.frame()
	h.contains("mode accept_edits")
	if len(h.api.modes) != 1 || h.api.modes[0] != "accept_edits" {
		t.Fatalf("modes %q", h.api.modes)
	}
}

func TestEscCancelsTheRunningTurn(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "/long 300")
	h.messageStart("turn_1", "msg_a")
	h.frame()
	h.run(h.key(esc))
	if len(h.api.cancelled) != 1 || h.api.cancelled[0] != "turn_1" {
		t.Fatalf("cancelled %v", h.api.cancelled)
	}

	// With the inspector open, esc closes it first.
	h = newHarness(t)
	h.turnStarted("turn_1", "/long 300")
	h.frame()
	h.key(f2)
	if cmd := h.key(esc); cmd != nil || h.m.inspector {
		t.Fatal("esc with the inspector open did not just close it")
	}
	h.run(h.key(esc))
	if len(h.api.cancelled) != 1 {
		t.Fatalf("cancelled %v", h.api.cancelled)
	}
}

// approvalRequested emits a request for a shell call of turn_1.
func (h *harness) approvalRequested(id, toolUseID, tool string, input map[string]any, targets ...string) {
	h.event("approval.requested", "turn_1", map[string]any{"approval_id": id, "tool_use_id": toolUseID, "tool_name": tool,
		"input": input, "kind": "execute", "targets": targets, "reason": "the default mode asks",
		"expires_at": time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)})
}

func TestApprovalPromptOnTheToolCard(t *testing.T) {
	for _, c := range []struct {
		key      string
		decision string
		scope    string
	}{{"y", protocol.DecisionAllow, protocol.ScopeOnce}, {"a", protocol.DecisionAllow, protocol.ScopeSession}} {
		h := newHarness(t)
		h.turnStarted("turn_1", "clean")
		h.messageStart("turn_1", "msg_a")
		h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "shell", map[string]string{"command": "rm -rf build"}))
		h.approvalRequested("apr_1", "tu_1", "shell", map[string]any{"command": "rm -rf build"}, "rm -rf build")
		h.frame()
		h.contains("▸ shell $ rm -rf build", "shell waits for your approval", "y allow once", "⏸ waiting for you",
			"⏸ the session waits for you")
		if !strings.Contains(h.m.View().WindowTitle, "waiting for you") {
			t.Fatalf("window title %q", h.m.View().WindowTitle)
		}
		h.run(h.key(tea.KeyPressMsg{Code: rune(c.key[0]), Text: c.key}))
		if len(h.api.answers) != 1 || h.api.answers[0].Decision != c.decision || h.api.answers[0].Scope != c.scope {
			t.Fatalf("%s: answers %+v", c.key, h.api.answers)
		}
		if h.m.composer.Value() != "" {
			t.Fatalf("the answer key was typed: %q", h.m.composer.Value())
		}
		h.event("approval.resolved", "turn_1", map[string]any{"approval_id": "apr_1", "tool_use_id": "tu_1", "decision": c.decision, "reason": "user"})
		h.frame()
		h.lacks("waits for your approval")
	}
}

func TestApprovalDenyWithAReason(t *testing.T) {
	h := newHarness(t)
	h.typeText("draft")
	h.turnStarted("turn_1", "write")
	h.messageStart("turn_1", "msg_a")
	input := map[string]any{"path": "a.go", "old_string": "x := 1", "new_string": "x := 2"}
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "edit_file", input))
	h.approvalRequested("apr_1", "tu_1", "edit_file", input, "a.go")
	h.frame()
	h.contains("-x := 1", "+x := 2") // the change, before the answer
	h.key(tea.KeyPressMsg{Code: 'n', Text: "n"})
	h.contains("denying")
	h.typeText("not yet")
	h.run(h.key(enter))
	if len(h.api.answers) != 1 || h.api.answers[0].Decision != protocol.DecisionDeny || h.api.answers[0].Reason != "not yet" {
		t.Fatalf("answers %+v", h.api.answers)
	}
	if got := h.m.composer.Value(); got != "draft" {
		t.Fatalf("the draft was not put back: %q", got)
	}
	if len(h.api.submitted) != 0 {
		t.Fatalf("the reason was sent as a turn: %q", h.api.submitted)
	}
}

func TestFailedCommandIsMarkedAsAFailure(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "run")
	h.messageStart("turn_1", "msg_a")
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "shell", map[string]string{"command": "exit 3"}),
		toolBlock("tu_2", "shell", map[string]string{"command": "true"}))
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "shell", "summary": "exit 3 in 5ms", "result": "exit code: 3\nstdout:\noops"})
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_2", "tool_name": "shell", "summary": "exit 0 in 4ms", "result": "exit code: 0"})
	h.frame()
	h.contains("✗ exit 3 in 5ms", "oops", "✓ exit 0 in 4ms")
	h.lacks("✓ exit 3")
}

// A shell call shows the command's output itself: stdout, then stderr
// in red, without the tool's "stdout:" and "stderr:" labels; expanded,
// more of it.
func TestShellResultShowsTheOutputWithoutLabels(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "run")
	h.messageStart("turn_1", "msg_a")
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "shell", map[string]string{"command": "make"}))
	code := 2
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "shell", "summary": "exit 2 in 9ms",
		"result": "exit code: 2\nstdout:\nbuilding\nstderr:\nmain.go:3: undefined: x\n", "exit_code": code})
	h.frame()
	h.contains("✗ exit 2 in 9ms", "    building", "    main.go:3: undefined: x")
	h.lacks("stdout:", "stderr:", "exit code:")
	if l := h.line("main.go:3: undefined"); !strings.Contains(l, "\x1b[") || l == h.line("building") {
		t.Fatalf("stderr is not marked apart from stdout: %q", l)
	}
}

// A TUI started on a session that already ran commands (a snapshot: no
// summaries, no exit_code) shows them as it did live: "exit N", red and
// with its output when the command failed.
func TestRestartedTUIShowsAStoredShellResultAsLive(t *testing.T) {
	h := newHarness(t)
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: []byte(`{"id":"` + testSession + `","active_model":"builtin:demo"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"m1","role":"user","turn_id":"t1","status":"complete","content":[{"type":"text","text":"run them"}]}`),
			json.RawMessage(`{"id":"m2","role":"assistant","turn_id":"t1","status":"complete","content":[` +
				`{"type":"tool_use","id":"tu1","name":"shell","input":{"command":"go vet"}},` +
				`{"type":"tool_use","id":"tu2","name":"shell","input":{"command":"true"}}]}`),
			json.RawMessage(`{"id":"m3","role":"tool","turn_id":"t1","status":"complete","content":[` +
				`{"type":"tool_result","tool_use_id":"tu1","content":"exit code: 1\nstdout:\nstderr:\nvet: bad printf\n"},` +
				`{"type":"tool_result","tool_use_id":"tu2","content":"exit code: 0\nstdout:\nstderr:\n"}]}`),
		},
		SnapshotAtEventID: "evt_00000000000000000000000009",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	h.contains("✗ exit 1", "    vet: bad printf", "✓ exit 0 · no output")
	h.lacks("exit code:", "stderr:")
}

// What a tool returned never drives the terminal: escape sequences in a
// command's output, a file's text or an error are dropped on the way to
// the screen (an OSC 52 sequence would set the user's clipboard, a
// cursor move would draw over the screen).
func TestToolOutputCannotDriveTheTerminal(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "run")
	h.messageStart("turn_1", "msg_a")
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "shell", map[string]string{"command": "cat evil\x1b[2J"}),
		toolBlock("tu_2", "read_file", map[string]string{"path": "evil"}), toolBlock("tu_3", "read_file", map[string]string{"path": "gone"}))
	osc := "\x1b]52;c;cm0gLXJmIH4K\x07"
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "shell", "summary": "exit 1 in 1ms" + osc,
		"result": "exit code: 1\nstdout:\nhi" + osc + "\x1b[Hthere\nstderr:\n\x1b[31mred\x1b[0m\n", "exit_code": 1})
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_2", "tool_name": "read_file", "summary": "read evil", "result": "line" + osc + "\n"})
	h.event("tool.failed", "turn_1", map[string]any{"tool_use_id": "tu_3", "tool_name": "read_file", "error_class": "tool_error", "message": "no such file" + osc})
	h.frame()
	h.key(ctrlO)
	raw := h.raw()
	for _, bad := range []string{"\x1b]52", "\x1b[H", "\x1b[2J", "\x07"} {
		if strings.Contains(raw, bad) {
			t.Fatalf("the screen carries %q from a tool's output:\n%q", bad, raw)
		}
	}
	h.contains("hithere", "red", "no such file")
}

// Nor does what a model streams, nor a command it asks to run: an
// approval shows the whole command, so a sequence that erases the line
// cannot hide "rm -rf ~" behind a harmless tail.
func TestModelTextAndApprovalsCannotDriveTheTerminal(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "go")
	h.messageStart("turn_1", "msg_a")
	h.textDelta("turn_1", "msg_a", 0, "streaming\x1b]52;c;eA==\x07 text\x1b[1A")
	h.frame()
	h.contains("streaming text")
	hidden := "rm -rf ~ \x1b[2K\recho hi"
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "shell", map[string]string{"command": hidden}))
	h.approvalRequested("apr_1", "tu_1", "shell", map[string]any{"command": hidden}, hidden)
	h.frame()
	for _, bad := range []string{"\x1b]52", "\x1b[1A", "\x1b[2K", "\r"} {
		if strings.Contains(h.raw(), bad) {
			i := strings.Index(h.raw(), bad)
			t.Fatalf("the screen carries %q from the stream: %q", bad, h.raw()[max(0, i-300):min(len(h.raw()), i+100)])
		}
	}
	h.contains("$ rm -rf ~ echo hi", "waits for your approval")
}

func TestEditDiffIsShownOnTheToolCard(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "edit")
	h.messageStart("turn_1", "msg_a")
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "edit_file", map[string]string{"path": "a.go"}))
	var long strings.Builder
	for i := range 30 {
		long.WriteString("+line " + string(rune('a'+i%26)) + "\n")
	}
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "edit_file", "summary": "edited a.go",
		"result": "ok", "paths": []string{"a.go"}, "diff": "--- a/a.go\n+++ b/a.go\n@@ -1 +1,30 @@\n-old\n" + long.String()})
	h.frame()
	h.contains("✓ edited a.go", "--- a/a.go", "-old", "more lines (tab shows more)")
	if l := h.line("-old"); !strings.Contains(l, "\x1b[") {
		t.Fatalf("the removed line is not coloured: %q", l)
	}
	h.key(ctrlO)
	h.lacks("more lines")
}

func TestFinishedTurnShowsItsTotals(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "hi")
	h.messageStart("turn_1", "msg_a")
	h.complete("turn_1", "msg_a", "end_turn", textBlock("hello"))
	h.event("turn.completed", "turn_1", map[string]any{"outcome": "completed", "llm_calls": 2, "duration_ms": 2300,
		"usage": map[string]any{"input_tokens": 1234, "output_tokens": 56, "cost_usd": 0.0123}})
	h.frame()
	h.contains("✓ done in 2.3s · 1.2k in · 56 out · $0.0123 · 2 calls")
}

func TestContextGaugeAndCompaction(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "hi")
	h.event("llm.call_completed", "turn_1", map[string]any{"message_id": "msg_a", "context_tokens": 170000, "context_window": 200000})
	h.event("turn.completed", "turn_1", map[string]any{"outcome": "completed"})
	h.frame()
	h.contains("ctx 170k/200k 85%", "/compact frees it")
	h.event("context.compacting", "", map[string]any{"trigger": "manual", "tokens_before": 170000})
	h.frame()
	h.contains("compacting the conversation…")
	h.event("context.compacted", "", map[string]any{"trigger": "manual", "method": "summary", "tokens_before": 170000, "tokens_after": 20000})
	h.frame()
	h.contains("ctx 20k/200k 10%", "conversation compacted (manual, summary): 170k → 20k tokens")
	h.lacks("compacting the conversation…")
}

func TestInspectorShowsAUserCancelAsACancel(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "hi")
	h.event("llm.call_failed", "turn_1", map[string]any{"message_id": "msg_a", "error_class": "cancelled", "message": "cancelled"})
	h.key(f2)
	h.frame()
	h.contains("llm.call cancelled")
	h.lacks("llm.call_failed")
}

func TestTheLiveEndStaysInViewAcrossF2AndResize(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "/long 300")
	h.messageStart("turn_1", "msg_a")
	for i := range 200 {
		h.textDelta("turn_1", "msg_a", 0, "Sentence "+strings.Repeat("x", i%7)+" end.\n")
	}
	h.textDelta("turn_1", "msg_a", 0, "THE LIVE END")
	h.frame()
	h.contains("THE LIVE END")
	h.key(f2)
	h.contains("THE LIVE END")
	h.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	h.contains("THE LIVE END")
	h.key(f2)
	h.m.Update(tea.WindowSizeMsg{Width: 120, Height: 50})
	h.contains("THE LIVE END")
}

func TestPickOrderPutsThisWorkspaceFirstNewestFirst(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC) }
	parent := "sess_a"
	list := []client.Session{
		{ID: "sess_a", WorkspacePath: "/other", LastActivityAt: at(9)},
		{ID: "sess_b", WorkspacePath: "/ws", LastActivityAt: at(1)},
		{ID: "sess_c", WorkspacePath: "/ws", LastActivityAt: at(5)},
		{ID: "sess_w", WorkspacePath: "/ws", LastActivityAt: at(8), ParentSessionID: &parent},
		{ID: "sess_d", WorkspacePath: "/ws", CreatedAt: at(3)},
	}
	var got []string
	for _, s := range PickOrder(list, "/ws") {
		got = append(got, s.ID)
	}
	if strings.Join(got, " ") != "sess_c sess_d sess_b sess_a" {
		t.Fatalf("order %v", got)
	}
}

func TestSessionPickerAndNewSwitchSessions(t *testing.T) {
	h := newHarness(t)
	h.api.sessions = []client.Session{
		{ID: testSession, WorkspacePath: "/ws", Title: "this one", LastActivityAt: time.Now()},
		{ID: "sess_OLD", WorkspacePath: "/ws", Title: "an older one", LastActivityAt: time.Now().Add(-3 * time.Hour)},
	}
	h.typeText("/sessions")
	h.run(h.key(enter))
	h.contains("● this one", "an older one — 3h ago")
	h.key(tea.KeyPressMsg{Code: tea.KeyDown})
	cmd := h.key(enter)
	if _, ok := cmd().(tea.QuitMsg); !ok || h.m.next != "sess_OLD" {
		t.Fatalf("enter on the picker: next %q", h.m.next)
	}

	h = newHarness(t)
	h.typeText("/new")
	created := h.key(enter)()
	_, cmd = h.m.Update(created)
	if cmd == nil {
		t.Fatal("/new: no switch")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok || h.m.next != "sess_NEW" {
		t.Fatalf("/new: next %q", h.m.next)
	}
	if len(h.api.created) != 1 || h.api.created[0].Workspace != "/ws" {
		t.Fatalf("created %+v", h.api.created)
	}
}
