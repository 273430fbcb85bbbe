package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/protocol"
)

// runningShell starts turn_1 with one shell call tu_1 that runs.
func (h *harness) runningShell(command string) {
	h.turnStarted("turn_1", "run it")
	h.messageStart("turn_1", "msg_a")
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "shell", map[string]string{"command": command}))
	h.event("tool.called", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "shell", "input": map[string]string{"command": command}})
}

// outputDelta emits one tool.output_delta of tu_1.
func (h *harness) outputDelta(stream, data string, offset int64, capped bool) {
	h.event("tool.output_delta", "turn_1", protocol.ToolOutputDeltaPayload{MessageID: "msg_a", ToolUseID: "tu_1",
		Stream: stream, Data: data, Offset: offset, Capped: capped})
}

func TestRunningCommandShowsItsLastLinesUntilItsResult(t *testing.T) {
	h := newHarness(t)
	h.runningShell("make test")
	h.frame()
	h.contains("▸ shell $ make test", "⋯ running")
	var off int64
	for i := 1; i <= 12; i++ {
		s := fmt.Sprintf("line %02d\n", i)
		h.outputDelta(protocol.OutputStdout, s, off, false)
		off += int64(len(s))
	}
	h.outputDelta(protocol.OutputStderr, "warn: \x1b[31mred\x1b[0m\tend\n", off, false)
	h.outputDelta(protocol.OutputStdout, "progress 10%\rprogress 90%", off+30, false)
	h.frame()
	h.contains("⋯ running · last 8 of 14 lines", "line 07", "line 12", "warn: red   end", "progress 90%")
	h.lacks("line 06", "progress 10%", "\x1b[31m")
	if l := h.line("warn: red"); !strings.Contains(l, "\x1b[") || l == h.line("line 12") {
		t.Fatalf("stderr line not styled apart: %q", l)
	}

	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "shell",
		"summary": "exit 0 in 1.2s", "result": "exit code: 0\nstdout:\nline 01", "exit_code": 0})
	h.frame()
	h.contains("✓ exit 0 in 1.2s")
	h.lacks("⋯ running", "line 12", "progress 90%")
	if len(h.m.live) != 0 {
		t.Fatalf("the live output of an ended call is kept: %v", h.m.live)
	}
}

func TestLiveOutputSaysWhenItJoinedLateOrWasCapped(t *testing.T) {
	h := newHarness(t)
	h.runningShell("yes")
	h.outputDelta(protocol.OutputStdout, "y\ny\n", 4096, false)
	h.outputDelta(protocol.OutputStdout, "", 1<<20, true)
	h.frame()
	h.contains("⋯ running · joined mid-output · live output capped: the command runs on", "y")
}

func TestLateOutputOfAnEndedCallIsDropped(t *testing.T) {
	h := newHarness(t)
	h.runningShell("echo hi")
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "shell",
		"summary": "exit 0 in 3ms", "result": "exit code: 0", "exit_code": 0})
	h.outputDelta(protocol.OutputStdout, "late\n", 0, false)
	h.frame()
	h.lacks("late")
	if len(h.m.live) != 0 {
		t.Fatalf("kept: %v", h.m.live)
	}
}

func TestLiveOutputIsDroppedWhenTheTurnEnds(t *testing.T) {
	h := newHarness(t)
	h.runningShell("sleep 9")
	h.outputDelta(protocol.OutputStdout, "zzz\n", 0, false)
	h.event("turn.cancelled", "turn_1", map[string]any{"reason": "user_cancel", "phase": "tools"})
	h.frame()
	if len(h.m.live) != 0 {
		t.Fatalf("kept after the turn: %v", h.m.live)
	}
}

func TestNonZeroExitCodeIsNeverAGreenCheck(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "run")
	h.messageStart("turn_1", "msg_a")
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "shell", map[string]string{"command": "make"}),
		toolBlock("tu_2", "shell", map[string]string{"command": "true"}))
	// The summary does not say "exit N": the exit code decides.
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "shell",
		"summary": "make: 2 targets failed", "result": "make: *** [all] Error 2", "exit_code": 2})
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_2", "tool_name": "shell",
		"summary": "done", "result": "", "exit_code": 0})
	h.frame()
	h.contains("✗ make: 2 targets failed", "make: *** [all] Error 2", "✓ done")
	h.lacks("✓ make")
	if l := h.line("make: 2 targets failed"); strings.Contains(l, "\x1b[32m") {
		t.Fatalf("a failed command drawn green: %q", l)
	}
}

func TestBackgroundCommandLostWithItsClusterNodeReadsPlainly(t *testing.T) {
	h := newHarness(t)
	h.event("tool.background_exited", "", map[string]any{"background_id": "bg_1", "command": "npm run dev",
		"exit_code": nil, "reason": protocol.BackgroundOwnerLost, "duration_ms": 12000})
	h.frame()
	h.contains("⚙ background bg_1 stopped after 12.0s: its cluster node was lost (failover) · $ npm run dev")
	h.lacks("owner_lost")
}

func TestBackgroundEndReasonsAreWords(t *testing.T) {
	code := 0
	for _, reason := range []string{protocol.BackgroundExited, protocol.BackgroundKilled, protocol.BackgroundTimeout,
		protocol.BackgroundServerShutdown, protocol.BackgroundServerLost, protocol.BackgroundOwnerLost,
		protocol.BackgroundSupervisorKilled, protocol.BackgroundSessionDeleted} {
		got := bgEnd(reason, &code, 3*time.Second)
		if strings.Contains(strings.ReplaceAll(got, "shell_kill", ""), "_") || !strings.Contains(got, "after 3.0s") {
			t.Errorf("%s: %q", reason, got)
		}
	}
	if got := bgEnd("new_reason", nil, 0); got != "new_reason" {
		t.Errorf("an unknown reason: %q", got)
	}
}

// The lines kept do not depend on how the output was cut into deltas,
// are the last liveLines of it, and none is longer than liveLineMax.
func TestLiveOutputKeepsTheLastLinesWhateverTheChunks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pieces := rapid.SliceOf(rapid.SampledFrom([]string{"a", "bc", "é", "\n", "\r", "\r\n", strings.Repeat("x", 300)})).Draw(t, "pieces")
		whole := strings.Join(pieces, "")
		var one liveOutput
		one.add(&protocol.ToolOutputDeltaPayload{Stream: protocol.OutputStdout, Data: whole})
		var chunked liveOutput
		for _, p := range pieces {
			chunked.add(&protocol.ToolOutputDeltaPayload{Stream: protocol.OutputStdout, Data: p})
		}
		a, b := one.tail(), chunked.tail()
		if fmt.Sprint(a) != fmt.Sprint(b) || one.lineCount() != chunked.lineCount() {
			t.Fatalf("whole %v (%d lines) vs chunked %v (%d lines)", a, one.lineCount(), b, chunked.lineCount())
		}
		if len(a) > liveLines || len(chunked.lines) > liveLines {
			t.Fatalf("%d lines kept", len(chunked.lines))
		}
		for _, l := range a {
			if len(l.text) > liveLineMax {
				t.Fatalf("a line of %d bytes", len(l.text))
			}
		}
		if n := strings.Count(whole, "\n"); chunked.total != n {
			t.Fatalf("%d lines counted, %d in the output", chunked.total, n)
		}
	})
}
