package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/tool"
)

// sessionTools is a tool source offering one tool to one session.
type sessionTools struct{ session string }

func (s sessionTools) Tools(_ context.Context, sid string) []tool.Tool {
	if sid != s.session {
		return nil
	}
	return []tool.Tool{structured{}}
}

// structured is a tool whose result carries structured output and an
// image, as an MCP tool's does.
type structured struct{}

func (structured) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "mcp__srv__get", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (structured) Run(context.Context, tool.Env, json.RawMessage) (tool.Result, error) {
	return tool.Result{Content: "got it", Summary: "got", Output: &tool.Output{Structured: json.RawMessage(`{"n":1}`),
		Images: []tool.Image{{MediaType: "image/png", Data: []byte("png")}}}}, nil
}

func TestToolSourceToolsAreOfferedAndRun(t *testing.T) {
	a := &seq{scripts: []script{
		{deltas: []model.Delta{{Kind: model.KindToolUseStart, Index: 0, ToolUseID: "call_1", ToolName: "mcp__srv__get"},
			{Kind: model.KindToolInput, Index: 0, Text: `{}`}, {Kind: model.KindBlockStop, Index: 0}},
			result: model.Result{StopReason: model.StopToolUse}},
		{deltas: textDeltas(1), result: model.Result{StopReason: model.StopEndTurn}},
	}}
	r := newRig(t, a)
	models := model.NewRegistry()
	models.Register("fake", a)
	r.loop = agent.New(agent.Config{Models: models, Tools: r.tools, Prices: price.NewTable(nil, nil),
		ToolSource: sessionTools{session: r.sid},
		History: agent.HistoryFunc(func(ctx context.Context, id string) ([]message.Message, error) {
			msgs, _, err := r.st.Messages(ctx, id, "", 0)
			return msgs, err
		})})
	_, evs := r.run(context.Background(), "fake:m")
	started := payload(t, find(evs, event.LLMCallStarted)[0])
	if tools := started["request"].(map[string]any)["tools"]; !contains(tools, "mcp__srv__get") || !contains(tools, "read_file") {
		t.Fatalf("offered: %v", tools)
	}
	done := find(evs, event.ToolCompleted)
	if len(done) != 1 {
		t.Fatalf("events: %v", types(evs))
	}
	p := payload(t, done[0])
	if sc, _ := p["structured_content"].(map[string]any); sc["n"] != float64(1) || p["structured_content_bytes"] != float64(7) {
		t.Fatalf("tool.completed: %v", p)
	}
	img := p["images"].([]any)[0].(map[string]any)
	if img["media_type"] != "image/png" || img["bytes"] != float64(3) || img["data"] != "cG5n" {
		t.Fatalf("image: %v", img)
	}
	// The loop's own registry is untouched: the source's tools are the
	// turn's.
	if _, ok := r.tools.Get("mcp__srv__get"); ok {
		t.Fatal("the source's tool leaked into the shared registry")
	}
}

func contains(list any, s string) bool {
	l, _ := list.([]any)
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
