package openai

import (
	"context"
	"net/http"
	"testing"

	"github.com/metis-agent/metis/internal/model"
)

// TestOverflowRefusalsAreContextOverflow: the refusals of a conversation
// too long for the window, as OpenAI and the compatible servers send
// them, are context_overflow (never retried), with the window they name;
// another 400 stays invalid_request.
func TestOverflowRefusalsAreContextOverflow(t *testing.T) {
	for _, c := range []struct {
		name, body string
		class      string
		window     int
	}{
		{"openai", `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130417 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			model.ClassContextOverflow, 128000},
		{"openai input exceeds", `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`,
			model.ClassContextOverflow, 0},
		{"vllm", `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4488 in the messages, 512 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
			model.ClassContextOverflow, 4096},
		{"llama.cpp", `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}`,
			model.ClassContextOverflow, 0},
		{"other", `{"error":{"message":"Invalid value for 'tool_choice'.","type":"invalid_request_error","param":"tool_choice","code":null}}`,
			model.ClassInvalidRequest, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := newServer(t, serveStatus(http.StatusBadRequest, nil, c.body))
			_, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
			me := asModelError(t, err)
			if me.Class != c.class || me.Retryable || fs.requests() != 1 {
				t.Fatalf("class %s retryable %v after %d requests: %s", me.Class, me.Retryable, fs.requests(), me.Message)
			}
			if w, ok := model.OverflowWindow(err); ok != (c.class == model.ClassContextOverflow) || w != c.window {
				t.Fatalf("OverflowWindow = %d, %v", w, ok)
			}
		})
	}
}

// TestContextWindowsFromTheModelList: GET /models entries that carry a
// window (context_length, max_model_len) give it; others (Ollama's) do
// not.
func TestContextWindowsFromTheModelList(t *testing.T) {
	fs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[
			{"id":"qwen/qwen3-coder","object":"model","created":1,"owned_by":"openrouter","context_length":262144},
			{"id":"meta-llama/Llama-3.1-8B","object":"model","created":1,"owned_by":"vllm","max_model_len":32768},
			{"id":"llama3.2:latest","object":"model","created":1,"owned_by":"library"},
			{"id":"odd","object":"model","context_length":"lots"}]}`))
	})
	got, err := fs.adapter(t, func(o *Options) { o.APIKey = "" }).ContextWindows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["qwen/qwen3-coder"] != 262144 || got["meta-llama/Llama-3.1-8B"] != 32768 {
		t.Fatalf("windows %v", got)
	}
}

// FuzzWindowOf: a listed model's JSON, from a server, never panics the
// reader and never yields a negative window.
func FuzzWindowOf(f *testing.F) {
	for _, s := range []string{`{"id":"a","context_length":4096}`, `{"max_model_len":1e9}`, `{"context_length":-1}`,
		`{"context_length":"8192"}`, `null`, `[]`, `{"context_window":99999999999999}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := windowOf(b); n < 0 {
			t.Fatalf("window %d from %q", n, b)
		}
	})
}
