package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

func conversationReq() model.Request {
	return model.Request{
		Model:  "openai:gpt-4.1",
		System: "You are metis.",
		Messages: []message.Message{
			userMsg("What is in a.txt and b.txt?"),
			{Role: message.RoleAssistant, Content: []message.Block{
				{Type: message.BlockThinking, Thinking: "Two reads.", Signature: "sig"},
				message.Text("Reading both."),
				{Type: message.BlockToolUse, ID: "call_a", Name: "read_file", Input: json.RawMessage(`{"path": "a.txt"}`)},
				{Type: message.BlockToolUse, ID: "call_b", Name: "read_file", Input: json.RawMessage(`{"path":"b.txt"}`)},
			}},
			{Role: message.RoleTool, Content: []message.Block{
				{Type: message.BlockToolResult, ToolUseID: "call_a", Content: "alpha"},
				{Type: message.BlockToolResult, ToolUseID: "call_b", Content: "no such file", IsError: true},
			}},
			{Role: message.RoleAssistant, Content: []message.Block{
				{Type: message.BlockToolUse, ID: "call_c", Name: "list_dir"}, // no input: {}
			}},
			{Role: message.RoleTool, Content: []message.Block{
				{Type: message.BlockToolResult, ToolUseID: "call_c", Content: ""},
			}},
			// thinking only: nothing to send
			{Role: message.RoleAssistant, Content: []message.Block{{Type: message.BlockThinking, Thinking: "hmm"}}},
			userMsg("Thanks."),
		},
		Tools: []model.ToolSpec{
			{Name: "read_file", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "list_dir"},
		},
		MaxTokens: 4096,
	}
}

func TestRequestBody(t *testing.T) {
	fs := newServer(t, replay(t, "text.sse"))
	if _, _, _, err := run(t, fs.adapter(t, nil), context.Background(), conversationReq()); err != nil {
		t.Fatal(err)
	}
	body := fs.body(t, 0)
	want := map[string]any{
		"model":          "gpt-4.1",
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"max_tokens":     4096.0, // a compatible server's base URL
		"messages": []any{
			map[string]any{"role": "system", "content": "You are metis."},
			map[string]any{"role": "user", "content": "What is in a.txt and b.txt?"},
			map[string]any{"role": "assistant", "content": "Reading both.", "tool_calls": []any{
				map[string]any{"id": "call_a", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path": "a.txt"}`}},
				map[string]any{"id": "call_b", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"b.txt"}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "call_a", "content": "alpha"},
			map[string]any{"role": "tool", "tool_call_id": "call_b", "content": "error: no such file"},
			map[string]any{"role": "assistant", "tool_calls": []any{
				map[string]any{"id": "call_c", "type": "function", "function": map[string]any{"name": "list_dir", "arguments": `{}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "call_c", "content": ""},
			map[string]any{"role": "user", "content": "Thanks."},
		},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "read_file", "description": "Read a file.",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}}}},
			map[string]any{"type": "function", "function": map[string]any{"name": "list_dir",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{}}}},
		},
	}
	for k, w := range want {
		if !reflect.DeepEqual(body[k], w) {
			g, _ := json.MarshalIndent(body[k], "", "  ")
			ww, _ := json.MarshalIndent(w, "", "  ")
			t.Errorf("%s:\n%s\nwant:\n%s", k, g, ww)
		}
	}
	for k := range body {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected field %s: %v", k, body[k])
		}
	}
}

// redirect sends every request to the test server, whatever its URL.
type redirect struct {
	to   *url.URL
	next http.RoundTripper
}

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = r.to.Scheme, r.to.Host
	req.Host = ""
	return r.next.RoundTrip(req)
}

func TestMaxCompletionTokensForOpenAI(t *testing.T) {
	fs := newServer(t, replay(t, "text.sse"))
	u, _ := url.Parse(fs.URL)
	a := fs.adapter(t, func(o *Options) {
		o.BaseURL = ""
		o.HTTPClient = &http.Client{Transport: redirect{to: u, next: o.HTTPClient.Transport}}
	})
	if _, _, _, err := run(t, a, context.Background(), simpleReq()); err != nil {
		t.Fatal(err)
	}
	body := fs.body(t, 0)
	if body["max_completion_tokens"] != 1024.0 || body["max_tokens"] != nil {
		t.Errorf("api.openai.com: max_completion_tokens %v, max_tokens %v", body["max_completion_tokens"], body["max_tokens"])
	}
	if fs.paths[0] != "/v1/chat/completions" {
		t.Errorf("path %s", fs.paths[0])
	}
}

func TestRequestErrors(t *testing.T) {
	a, err := New(Options{BaseURL: "http://localhost:1/v1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]model.Request{
		"no model":   {Model: "openai:"},
		"bad schema": {Model: "openai:m", Tools: []model.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}},
	} {
		_, err := a.Stream(context.Background(), req, func(model.Delta) error { return nil })
		if me := asModelError(t, err); me.Class != model.ClassInvalidRequest {
			t.Errorf("%s: %v", name, err)
		}
	}
}
