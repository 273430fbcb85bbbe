package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/store"
)

// TestShellOutputDeltasComeBeforeToolCompleted: a shell call's live
// output is streamed as tool.output_delta events (actor tool, the
// call's ids), all of them between its tool.called and its
// tool.completed, and tool.completed carries the exit code.
func TestShellOutputDeltasComeBeforeToolCompleted(t *testing.T) {
	q := &seq{scripts: []script{
		{deltas: []model.Delta{
			{Kind: model.KindToolUseStart, Index: 0, ToolUseID: "tu_sh", ToolName: "shell"},
			{Kind: model.KindToolInput, Index: 0, Text: `{"command":"printf 'a\\n'; sleep 0.1; printf 'b\\n' >&2; exit 4"}`},
			{Kind: model.KindBlockStop, Index: 0},
		}, result: model.Result{StopReason: model.StopToolUse}},
		{deltas: []model.Delta{{Kind: model.KindText, Text: "done"}}, result: model.Result{StopReason: model.StopEndTurn}},
	}}
	r := newRig(t, q)
	out, evs := r.run(context.Background(), "fake:m")
	if out.Status != store.TurnCompleted {
		t.Fatalf("outcome %+v", out)
	}
	called, completed := -1, -1
	var live strings.Builder
	for i, e := range evs {
		switch e.Type {
		case event.ToolCalled:
			called = i
		case event.ToolCompleted:
			completed = i
			if p := payload(t, e); p["exit_code"] != float64(4) {
				t.Errorf("tool.completed exit_code %v, want 4", p["exit_code"])
			}
		case event.ToolOutputDelta:
			if called < 0 || completed >= 0 {
				t.Fatalf("tool.output_delta at %d outside the call (called %d, completed %d): %v", i, called, completed, types(evs))
			}
			p := payload(t, e)
			if p["tool_use_id"] != "tu_sh" || p["message_id"] == "" || e.Actor != event.ActorTool {
				t.Errorf("delta %+v actor %s", p, e.Actor)
			}
			live.WriteString(p["stream"].(string) + ":" + p["data"].(string))
		}
	}
	if live.String() != "stdout:a\nstderr:b\n" {
		t.Fatalf("live output %q", live.String())
	}
}
