package openai

import (
	"testing"

	"github.com/metis-agent/metis/internal/model"
)

// TestNamelessToolCallStarts: a tool call whose function name never
// arrives is not dropped: it starts, nameless, with its id and
// arguments, so the agent fails it visibly.
func TestNamelessToolCallStarts(t *testing.T) {
	r := runStream(t, []byte(streamSeeds[0]))
	if !r.clean {
		t.Fatal("the stream did not end cleanly")
	}
	var starts []model.Delta
	input := map[int]string{}
	for _, d := range r.deltas {
		switch d.Kind {
		case model.KindToolUseStart:
			starts = append(starts, d)
		case model.KindToolInput:
			input[d.Index] += d.Text
		}
	}
	if len(starts) != 2 || starts[0].ToolName != "f" || starts[1].ToolUseID != "c_nameless" || starts[1].ToolName != "" {
		t.Fatalf("starts %+v", starts)
	}
	if input[starts[1].Index] != `{"p":1}` {
		t.Fatalf("nameless call's input %q", input[starts[1].Index])
	}
}
