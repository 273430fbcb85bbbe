package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

func TestRequestBody(t *testing.T) {
	f := newFake(t, serveSSE(loadSSE(t, "text.sse")))
	req := model.Request{
		Model:     "anthropic:claude-sonnet-4-6",
		System:    "You are metis.",
		MaxTokens: 1234,
		Tools: []model.ToolSpec{
			{Name: "read_file", Description: "Read a file", InputSchema: json.RawMessage(
				`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
			{Name: "noop"},
		},
		Messages: []message.Message{
			{Role: message.RoleUser, Content: []message.Block{message.Text("read a.go")}},
			{Role: message.RoleAssistant, Content: []message.Block{
				{Type: message.BlockThinking, Thinking: "I should read it", Signature: "sig-1"},
				{Type: message.BlockThinking, Thinking: "cut short, unsigned"},
				message.Text("Reading."),
				{Type: message.BlockToolUse, ID: "toolu_1", Name: "read_file", Input: json.RawMessage(`{"path":"a.go"}`)},
				{Type: message.BlockToolUse, ID: "toolu_2", Name: "noop"},
			}},
			{Role: message.RoleTool, Content: []message.Block{
				{Type: message.BlockToolResult, ToolUseID: "toolu_1", Content: "package a"},
				{Type: message.BlockToolResult, ToolUseID: "toolu_2", Content: "no such tool", IsError: true},
			}},
			{Role: message.RoleUser, Content: []message.Block{message.Text("thanks")}},
			{Role: message.RoleAssistant, Content: []message.Block{message.Text("")}}, // empty: dropped
			{Role: message.RoleUser, Content: []message.Block{message.Text("and b.go?")}},
			{Role: message.RoleAssistant, Content: []message.Block{message.Text("Sure.")}},
			{Role: message.RoleAssistant, Content: []message.Block{message.Text("Here:")}},
		},
	}
	if o := run(t.Context(), newAdapter(t, f, nil), req, nil); o.err != nil {
		t.Fatal(o.err)
	}
	got := f.body(0)
	want := map[string]any{}
	json.Unmarshal([]byte(`{
		"model": "claude-sonnet-4-6",
		"max_tokens": 1234,
		"stream": true,
		"system": [{"type": "text", "text": "You are metis."}],
		"tools": [
			{"name": "read_file", "description": "Read a file",
			 "input_schema": {"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}},
			{"name": "noop", "input_schema": {"type": "object"}}
		],
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "read a.go"}]},
			{"role": "assistant", "content": [
				{"type": "thinking", "thinking": "I should read it", "signature": "sig-1"},
				{"type": "text", "text": "Reading."},
				{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.go"}},
				{"type": "tool_use", "id": "toolu_2", "name": "noop", "input": {}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "package a"}]},
				{"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "no such tool"}], "is_error": true},
				{"type": "text", "text": "thanks"},
				{"type": "text", "text": "and b.go?"}
			]},
			{"role": "assistant", "content": [{"type": "text", "text": "Sure."}, {"type": "text", "text": "Here:"}]}
		]
	}`), &want)
	for k, w := range want {
		gb, _ := json.Marshal(got[k])
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Errorf("%s\n got %s\nwant %s", k, gb, wb)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected field %s: %v", k, got[k])
		}
	}
}

func TestRequestDefaults(t *testing.T) {
	p, err := buildParams(simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxTokens != DefaultMaxTokens || string(p.Model) != "claude-sonnet-4-6" || len(p.System) != 0 || len(p.Tools) != 0 {
		t.Fatalf("%+v", p)
	}
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), `"system"`) || strings.Contains(string(b), `"tools"`) {
		t.Fatalf("empty system/tools sent: %s", b)
	}
}

func TestRequestInvalid(t *testing.T) {
	for _, req := range []model.Request{
		{Model: "openai:gpt-4.1", Messages: simpleRequest().Messages},
		{Model: "anthropic:", Messages: simpleRequest().Messages},
		{Model: "anthropic:claude", Messages: []message.Message{{Role: message.RoleUser, Content: []message.Block{message.Text("")}}}},
	} {
		_, err := buildParams(req)
		if class, _ := model.Classify(err); class != model.ClassInvalidRequest {
			t.Errorf("%+v: %v", req, err)
		}
	}
	if name, err := modelName("claude-opus-4-6"); err != nil || name != "claude-opus-4-6" {
		t.Fatalf("bare name: %q %v", name, err)
	}
}

// An empty tool result is sent without content (the API rejects empty
// text blocks); a malformed stored tool input goes back as {}.
func TestRequestEdgeBlocks(t *testing.T) {
	msgs := convertMessages([]message.Message{
		{Role: message.RoleUser, Content: []message.Block{message.Text("go")}},
		{Role: message.RoleAssistant, Content: []message.Block{{Type: message.BlockToolUse, ID: "t1", Name: "x", Input: json.RawMessage(`{"a":`)}}},
		{Role: message.RoleTool, Content: []message.Block{{Type: message.BlockToolResult, ToolUseID: "t1"}}},
	})
	b, _ := json.Marshal(msgs)
	want := `[{"content":[{"text":"go","type":"text"}],"role":"user"},` +
		`{"content":[{"id":"t1","input":{},"name":"x","type":"tool_use"}],"role":"assistant"},` +
		`{"content":[{"tool_use_id":"t1","type":"tool_result"}],"role":"user"}]`
	if !jsonEqual(t, string(b), want) {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

// TestThinkingBudget: a thinking budget enables extended thinking, at
// least 1024 tokens and below max_tokens (raised if needed).
func TestThinkingBudget(t *testing.T) {
	msgs := []message.Message{{Role: message.RoleUser, Content: []message.Block{message.Text("think")}}}
	for _, c := range []struct {
		budget, maxTokens   int
		wantBudget, wantMax int64
	}{
		{0, 4096, 0, 4096},
		{2000, 4096, 2000, 4096},
		{100, 4096, 1024, 4096},
		{8000, 4096, 8000, 9024},
	} {
		p, err := buildParams(model.Request{Model: "anthropic:claude-sonnet-4-6", Messages: msgs, MaxTokens: c.maxTokens, ThinkingBudget: c.budget})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		var body struct {
			MaxTokens int64 `json:"max_tokens"`
			Thinking  *struct {
				Type         string `json:"type"`
				BudgetTokens int64  `json:"budget_tokens"`
			} `json:"thinking"`
		}
		json.Unmarshal(b, &body)
		if c.wantBudget == 0 {
			if body.Thinking != nil {
				t.Errorf("budget 0: thinking %+v", body.Thinking)
			}
		} else if body.Thinking == nil || body.Thinking.Type != "enabled" || body.Thinking.BudgetTokens != c.wantBudget {
			t.Errorf("budget %d: thinking %+v in %s", c.budget, body.Thinking, b)
		}
		if body.MaxTokens != c.wantMax {
			t.Errorf("budget %d: max_tokens %d, want %d", c.budget, body.MaxTokens, c.wantMax)
		}
	}
}
