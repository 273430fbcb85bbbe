package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// sse writes Anthropic-style named events.
func sse(w io.Writer, typ string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func anthropicStart(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_x", "type": "message",
		"role": "assistant", "content": []any{}, "model": "claude-sonnet-4-6", "usage": map[string]any{"input_tokens": 1000, "output_tokens": 1}}})
}

func blockDelta(w io.Writer, i int, delta map[string]any) {
	sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
}

// fakeAnthropic answers the first request with thinking, text and a
// list_dir call split mid-token, and the second with text; it records
// the request bodies.
type fakeAnthropic struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	n := len(f.bodies)
	f.mu.Unlock()
	anthropicStart(w)
	if n == 1 {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "thinking", "thinking": ""}})
		blockDelta(w, 0, map[string]any{"type": "thinking_delta", "thinking": "I should look "})
		blockDelta(w, 0, map[string]any{"type": "thinking_delta", "thinking": "at the files."})
		blockDelta(w, 0, map[string]any{"type": "signature_delta", "signature": "sig-abc"})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "text", "text": ""}})
		blockDelta(w, 1, map[string]any{"type": "text_delta", "text": "Let me "})
		blockDelta(w, 1, map[string]any{"type": "text_delta", "text": "list them."})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 1})
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 2, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": map[string]any{}}})
		blockDelta(w, 2, map[string]any{"type": "input_json_delta", "partial_json": `{"pa`})
		blockDelta(w, 2, map[string]any{"type": "input_json_delta", "partial_json": `th": "."}`})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 2})
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use"}, "usage": map[string]any{"output_tokens": 40}})
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		blockDelta(w, 0, map[string]any{"type": "text_delta", "text": "There is a README.md."})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": 8}})
	}
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

func withAnthropic(url string) servertest.Option {
	return func(c *config.Config) {
		c.Providers = config.Providers{"anthropic": {APIKey: "test-key", BaseURL: url}}
	}
}

func createWithModel(t *testing.T, h *servertest.Harness, model string) string {
	var s struct {
		ID string `json:"id"`
	}
	if st := h.Do("POST", "/sessions", map[string]string{"workspace_path": h.Workspace, "model": model}, &s); st != 201 {
		t.Fatalf("create: %d", st)
	}
	return s.ID
}

// TestAnthropicTurnThroughTheServer: a recorded Anthropic stream with
// thinking, text and a tool call split mid-token becomes the canonical
// events on a WebSocket client; the tool runs and its result goes back
// in Anthropic's format; usage is priced.
func TestAnthropicTurnThroughTheServer(t *testing.T) {
	fake := &fakeAnthropic{}
	api := httptest.NewServer(fake)
	defer api.Close()
	h := servertest.Start(t, "", withAnthropic(api.URL))
	sid := createWithModel(t, h, "anthropic:claude-sonnet-4-6")
	c := attach(t, h, sid)
	turn := h.Submit(sid, "what is here?")
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	got := types(evs)
	want := []string{"turn.started", "route.decided", "llm.call_started", "message.start",
		"thinking.delta", "thinking.delta", "thinking.delta", "text.delta", "text.delta",
		"tool.use_start", "tool.use_input_delta", "tool.use_input_delta", "tool.use_end",
		"message.complete", "llm.call_completed", "tool.called", "tool.completed",
		"llm.call_started", "message.start", "text.delta", "message.complete", "llm.call_completed", "turn.completed"}
	if !slices.Equal(got, want) {
		t.Fatalf("sequence\n got %v\nwant %v", got, want)
	}
	th := find(evs, event.ThinkingDelta)
	if p := payloadOf(t, th[len(th)-1]); p["signature"] != "sig-abc" {
		t.Errorf("last thinking.delta %v", p)
	}
	if p := payloadOf(t, th[0]); p["signature"] != nil {
		t.Errorf("first thinking.delta carries a signature: %v", p)
	}
	end := payloadOf(t, find(evs, event.ToolUseEnd)[0])
	if fi, _ := json.Marshal(end["final_input"]); string(fi) != `{"path":"."}` {
		t.Errorf("final_input %s", fi)
	}
	usage := payloadOf(t, find(evs, event.LLMCallCompleted)[0])["usage"].(map[string]any)
	if usage["input_tokens"].(float64) != 1000 || usage["output_tokens"].(float64) != 40 || usage["cost_usd"].(float64) <= 0 {
		t.Errorf("usage %v", usage)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.bodies) != 2 || fake.bodies[0]["model"] != "claude-sonnet-4-6" || fake.bodies[0]["stream"] != true {
		t.Fatalf("requests %v", fake.bodies)
	}
	second, _ := json.Marshal(fake.bodies[1]["messages"])
	if !strings.Contains(string(second), `"tool_result"`) || !strings.Contains(string(second), "README.md") || !strings.Contains(string(second), "sig-abc") {
		t.Errorf("second request lacks the tool result or the signature: %s", second)
	}
}

// TestSpec11_1_7_CancelDuringLLMStreaming through the server and a real
// provider stream: the provider sees the disconnect, the client sees
// message.complete(cancelled) with the partial text, llm.call_failed
// (cancelled) and turn.cancelled, no tool.failed; the partial message is
// stored as cancelled.
func TestSpec11_1_7_CancelDuringLLMStreaming(t *testing.T) {
	disconnected := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		anthropicStart(w)
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		blockDelta(w, 0, map[string]any{"type": "text_delta", "text": "I'll start by "})
		blockDelta(w, 0, map[string]any{"type": "text_delta", "text": "analyzing the"})
		<-r.Context().Done()
		close(disconnected)
	}))
	defer api.Close()
	h := servertest.Start(t, "", withAnthropic(api.URL))
	sid := createWithModel(t, h, "anthropic:claude-sonnet-4-6")
	tui, dash := attach(t, h, sid), attach(t, h, sid)
	turn := h.Submit(sid, "analyze")
	n := 0
	tui.Events(wait, func(e *protocol.EventEnvelope) bool {
		if e.Type == "text.delta" {
			n++
		}
		return n == 2
	})
	tui.Send(map[string]any{"type": "cancel", "turn_id": turn, "reason": "user_cancel"})
	rest := tui.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	if got := types(rest); !slices.Equal(got, []string{"message.complete", "llm.call_failed", "turn.cancelled"}) {
		t.Fatalf("after the cancel: %v", got)
	}
	mc := payloadOf(t, rest[0])
	if mc["stop_reason"] != "cancelled" || mc["final_content"].([]any)[0].(map[string]any)["text"] != "I'll start by analyzing the" {
		t.Fatalf("message.complete %v", mc)
	}
	if p := payloadOf(t, rest[1]); p["error_class"] != "cancelled" {
		t.Fatalf("llm.call_failed %v", p)
	}
	<-disconnected // the provider saw the request end
	all := dash.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	if count(all, event.ToolFailed) != 0 || !slices.Equal(types(all[len(all)-3:]), types(rest)) {
		t.Fatalf("dashboard %v", types(all))
	}
	h.WaitTurn(sid)
	msgs, _, _ := h.Server.Store.Messages(context.Background(), sid, "", 0)
	if last := msgs[len(msgs)-1]; last.Status != message.StatusCancelled || last.PlainText() != "I'll start by analyzing the" {
		t.Fatalf("stored message %+v", last)
	}
}

// TestOpenAITurnThroughTheServer: an OpenAI-compatible server (varying
// chunk ids, tool call arguments split across chunks, the usage chunk)
// drives a tool loop through the whole server.
func TestOpenAITurnThroughTheServer(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r) // the startup query of /v1/models included
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		bodies = append(bodies, body)
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(id string, delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "model": "llama",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		if n == 1 {
			chunk("a", map[string]any{"role": "assistant", "content": "Looking."}, nil)
			chunk("b", map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function", "function": map[string]any{"name": "read_file", "arguments": ""}}}}, nil)
			chunk("c", map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `{"path": "REA`}}}}, nil)
			chunk("d", map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `DME.md"}`}}}}, nil)
			chunk("e", map[string]any{}, "tool_calls")
		} else {
			chunk("f", map[string]any{"role": "assistant", "content": "It says hello."}, nil)
			chunk("f", map[string]any{}, "stop")
		}
		b, _ := json.Marshal(map[string]any{"id": "u", "object": "chat.completion.chunk", "choices": []any{},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20}})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
	}))
	defer api.Close()
	h := servertest.Start(t, "", func(c *config.Config) {
		c.Providers = config.Providers{"openai": {BaseURL: api.URL + "/v1"}}
	})
	sid := createWithModel(t, h, "openai:llama3")
	c := attach(t, h, sid)
	turn := h.Submit(sid, "read the readme")
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	if p := payloadOf(t, find(evs, event.ToolCompleted)[0]); !strings.Contains(p["result"].(string), "content of README.md") {
		t.Fatalf("tool.completed %v", p)
	}
	end := payloadOf(t, find(evs, event.ToolUseEnd)[0])
	if fi, _ := json.Marshal(end["final_input"]); string(fi) != `{"path":"README.md"}` {
		t.Errorf("final_input %s", fi)
	}
	if u := payloadOf(t, find(evs, event.LLMCallCompleted)[0])["usage"].(map[string]any); u["input_tokens"].(float64) != 100 || u["output_tokens"].(float64) != 20 {
		t.Errorf("usage %v", u)
	}
	mu.Lock()
	defer mu.Unlock()
	second, _ := json.Marshal(bodies[1]["messages"])
	if !strings.Contains(string(second), `"role":"tool"`) || !strings.Contains(string(second), "call_1") {
		t.Errorf("second request: %s", second)
	}
	if bodies[0]["model"] != "llama3" {
		t.Errorf("model %v", bodies[0]["model"])
	}
}

// TestUnavailableProviderIsRefusedClearly: without a key, a session on
// anthropic:* is refused with a message saying what to set.
func TestUnavailableProviderIsRefusedClearly(t *testing.T) {
	h := servertest.Start(t, "")
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if st := h.Do("POST", "/sessions", map[string]string{"workspace_path": h.Workspace, "model": "anthropic:claude-sonnet-4-6"}, &e); st != 400 ||
		!strings.Contains(e.Error.Message, "ANTHROPIC_API_KEY") {
		t.Fatalf("%d %+v", st, e)
	}
}

// TestLocalServerModelBecomesTheDefault: with only OPENAI_BASE_URL set
// (a local Ollama, no key), the first model the server lists becomes the
// default, and a session created without a model runs on it. A server
// that cannot be reached leaves the offline demo model as the default.
func TestLocalServerModelBecomesTheDefault(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"llama3.2:latest","object":"model","created":1730000000,"owned_by":"library"},{"id":"qwen2.5:7b","object":"model","created":1,"owned_by":"library"}]}`)
		case "/v1/chat/completions":
			var body map[string]any
			json.NewDecoder(r.Body).Decode(&body)
			mu.Lock()
			asked = append(asked, fmt.Sprint(body["model"]))
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"a","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	h := servertest.Start(t, "", func(c *config.Config) { c.Providers = config.Providers{"openai": {BaseURL: api.URL + "/v1"}} })
	if got := h.Server.Config.DefaultModel; got != "openai:llama3.2:latest" {
		t.Fatalf("default model %q", got)
	}
	sid := h.CreateSession()
	c := attach(t, h, sid)
	turn := h.Submit(sid, "hello")
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	if p := payloadOf(t, find(evs, event.TurnCompleted)[0]); p["outcome"] != "completed" {
		t.Fatalf("turn.completed %v", p)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != "llama3.2:latest" {
		t.Fatalf("chat requests for models %v", asked)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	h2 := servertest.Start(t, "", func(c *config.Config) { c.Providers = config.Providers{"openai": {BaseURL: down.URL + "/v1"}} })
	if got := h2.Server.Config.DefaultModel; got != "builtin:demo" {
		t.Fatalf("default model with the local server down: %q", got)
	}
}
