package anthropic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// Anthropic's refusals of a request too long for the window, as the API
// sends them (status 400).
const (
	bodyPromptTooLong = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 200251 tokens > 200000 maximum"},"request_id":"req_011CWdepJvA2D819tdYYq4h7"}`
	bodyInputAndMax   = `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 199759 + 8192 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again"},"request_id":"req_011CUWu7a8bGeMSvA9d7DRLa"}`
	bodyOtherInvalid  = `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""}}`
)

func rawAnswer(status int, body string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_err_1")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// TestOverflowRefusalsAreContextOverflow: Anthropic's two 400 answers
// for a conversation too long for the window are context_overflow (not
// retried, with the window they name); another invalid request stays
// invalid_request.
func TestOverflowRefusalsAreContextOverflow(t *testing.T) {
	for _, c := range []struct {
		name, body string
		class      string
		window     int
	}{
		{"prompt is too long", bodyPromptTooLong, model.ClassContextOverflow, 200000},
		{"input and max_tokens", bodyInputAndMax, model.ClassContextOverflow, 200000},
		{"other", bodyOtherInvalid, model.ClassInvalidRequest, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, rawAnswer(400, c.body))
			o := run(context.Background(), newAdapter(t, f, nil), simpleRequest(), nil)
			class, retryable := classOf(o.err)
			if class != c.class || retryable || f.requests() != 1 {
				t.Fatalf("class %s retryable %v after %d requests: %v", class, retryable, f.requests(), o.err)
			}
			if w, ok := model.OverflowWindow(o.err); ok != (c.window > 0) || w != c.window {
				t.Fatalf("OverflowWindow = %d, %v", w, ok)
			}
			if _, msg := model.Classify(o.err); !strings.Contains(msg, "req_err_1") {
				t.Errorf("message lacks the request id: %s", msg)
			}
		})
	}
}

// TestWindowExceededStopIsOverflow: a stream that ends with stop_reason
// model_context_window_exceeded keeps its text and fails with
// context_overflow, which the agent loop answers by compacting.
func TestWindowExceededStopIsOverflow(t *testing.T) {
	script := strings.Join([]string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-6","usage":{"input_tokens":199000,"output_tokens":1}}}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The answer is"}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"model_context_window_exceeded","stop_sequence":null},"usage":{"output_tokens":1000}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	}, "\n\n") + "\n\n"
	f := newFake(t, serveSSE(script))
	o := run(context.Background(), newAdapter(t, f, nil), simpleRequest(), nil)
	if class, _ := classOf(o.err); class != model.ClassContextOverflow {
		t.Fatalf("class %s: %v", class, o.err)
	}
	if got := o.acc.Content(); len(got) != 1 || got[0].Text != "The answer is" || o.res.Usage.OutputTokens != 1000 {
		t.Fatalf("content %+v usage %+v", got, o.res.Usage)
	}
}

// TestPromptCacheBreakpoints: with PromptCache the request marks the
// last tool, the system prompt, the end of the previous call's request
// and the end of this one (never a thinking block); without it, nothing.
func TestPromptCacheBreakpoints(t *testing.T) {
	req := model.Request{Model: "anthropic:claude-sonnet-4-6", System: "be careful", MaxTokens: 100,
		Tools: []model.ToolSpec{{Name: "a"}, {Name: "b"}},
		Messages: []message.Message{
			{Role: message.RoleUser, Content: []message.Block{message.Text("first")}},
			{Role: message.RoleAssistant, Content: []message.Block{message.Text("ok")}},
			{Role: message.RoleUser, Content: []message.Block{message.Text("second")}},
			{Role: message.RoleAssistant, Content: []message.Block{
				{Type: message.BlockText, Text: "calling"},
				{Type: message.BlockToolUse, ID: "tu1", Name: "a", Input: json.RawMessage(`{}`)},
				{Type: message.BlockThinking, Thinking: "hm", Signature: "sig"}}},
			{Role: message.RoleTool, Content: []message.Block{{Type: message.BlockToolResult, ToolUseID: "tu1", Content: "result"}}},
		}}
	marks := func(p map[string]any) []string {
		var out []string
		var walk func(path string, v any)
		walk = func(path string, v any) {
			switch x := v.(type) {
			case map[string]any:
				if cc, ok := x["cache_control"].(map[string]any); ok && cc["type"] == "ephemeral" {
					out = append(out, path)
				}
				for k, e := range x {
					walk(path+"."+k, e)
				}
			case []any:
				for i, e := range x {
					walk(path+"["+strconv.Itoa(i)+"]", e)
				}
			}
		}
		walk("", p)
		return out
	}
	for _, cache := range []bool{true, false} {
		req.PromptCache = cache
		p, err := buildParams(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		var m map[string]any
		json.Unmarshal(b, &m)
		got := marks(m)
		sort.Strings(got)
		want := ".messages[2].content[0] .messages[4].content[0] .system[0] .tools[1]"
		if !cache {
			want = ""
		}
		if strings.Join(got, " ") != want {
			t.Errorf("cache %v: breakpoints %q, want %q\n%s", cache, got, want, b)
		}
	}
}
