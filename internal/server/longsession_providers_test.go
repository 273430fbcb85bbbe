package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
)

const sonnet = "anthropic:claude-sonnet-4-6"

// liveEvents returns the session's catalog events of one type, as
// delivered live, decoded.
func liveEvents(t *testing.T, h *servertest.Harness, sid string, typ event.Type) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range h.Live.Events(sid) {
		if e.Type == typ {
			var m map[string]any
			servertest.Must(t, json.Unmarshal(e.Payload, &m))
			out = append(out, m)
		}
	}
	return out
}

// completeTurns runs n turns (the text of turn i is format with i),
// fails the test on any that does not complete, and returns the last
// one's id.
func completeTurns(t *testing.T, h *servertest.Harness, sid string, n int, format string) string {
	t.Helper()
	var id string
	for i := range n {
		id = h.Submit(sid, fmt.Sprintf(format, i))
		h.WaitTurn(sid)
		if row, _ := h.Server.Store.Turn(context.Background(), id); row.Status != store.TurnCompleted {
			t.Fatalf("turn %d ended %s %s", i, row.Status, row.Reason)
		}
	}
	return id
}

// cacheFigures runs a ten-turn session (each turn reads a 4.5 KB file
// and answers) on the caching fake with prompt-cache on or off, and
// returns the input tokens of the calls (all of them, those read from
// the cache, those written to it) and their input cost in USD at
// claude-sonnet-4-6's list prices, as metis priced them.
func cacheFigures(t *testing.T, cache bool) (total, read, written int64, inputUSD float64) {
	fake := newCachingAnthropic()
	api := httptest.NewServer(fake)
	defer api.Close()
	h := servertest.Start(t, "", withAnthropic(api.URL), func(c *config.Config) { c.PromptCache = cache })
	writeNotes(t, h.Workspace)
	sid := createWithModel(t, h, sonnet)
	completeTurns(t, h, sid, 10, "turn %d: what do the notes say about caching?")
	p, _ := price.NewTable(nil, nil).Lookup(sonnet)
	for _, c := range liveEvents(t, h, sid, event.LLMCallCompleted) {
		var u message.Usage
		b, _ := json.Marshal(c["usage"])
		servertest.Must(t, json.Unmarshal(b, &u))
		total += u.InputTokens + u.CacheReadTokens + u.CacheCreationTokens
		read += u.CacheReadTokens
		written += u.CacheCreationTokens
		inputUSD += (float64(u.InputTokens)*p.Input + float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheCreationTokens)*p.CacheWrite) / 1e6
	}
	return total, read, written, inputUSD
}

// TestPromptCachingCutsTheInputCost: over a ten-turn session on a fake
// Anthropic API that accounts for the cache as the real one does, the
// requests' cache breakpoints make most input tokens cache reads, and
// the input cost falls accordingly; llm.call_completed reports the
// cache reads and writes.
func TestPromptCachingCutsTheInputCost(t *testing.T) {
	total, read, written, cached := cacheFigures(t, true)
	total0, read0, _, uncached := cacheFigures(t, false)
	share := float64(read) / float64(total)
	t.Logf("ten turns, 20 calls, %d input tokens: with caching %.1f%% read from the cache (%d), %d written; input $%.4f vs $%.4f without (%.0f%% less)",
		total, 100*share, read, written, cached, uncached, 100*(1-cached/uncached))
	if total != total0 || read0 != 0 {
		t.Fatalf("the two sessions differ: %d vs %d input tokens, %d read without caching", total, total0, read0)
	}
	if share < 0.7 || cached > 0.5*uncached {
		t.Fatalf("caching read %.0f%% of the input; input cost $%.4f vs $%.4f", 100*share, cached, uncached)
	}
}

// TestAnthropicOverflowIsCompactedAndRetried: Anthropic's real refusal
// ("prompt is too long: N tokens > M maximum", 400) on a session's call
// is answered by a compaction (trigger overflow, the summary call made
// without tools) and the same call made again, which succeeds. The
// fake refuses a request far smaller than the window it names, so the
// compaction aims at a window the refused request is taken to fill.
func TestAnthropicOverflowIsCompactedAndRetried(t *testing.T) {
	fake := newCachingAnthropic()
	fake.overflow = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_011CWdepJvA2D819tdYYq4h7"}`
	fake.overflowAt = 2*4 + 1 // the first call of the fifth turn
	api := httptest.NewServer(fake)
	defer api.Close()
	h := servertest.Start(t, "", withAnthropic(api.URL))
	writeNotes(t, h.Workspace)
	sid := createWithModel(t, h, sonnet)
	last := completeTurns(t, h, sid, 5, "turn %d: read the notes")
	var seq []event.Type
	for _, e := range h.Live.Events(sid) {
		if e.TurnID == last && event.FamilyOf(e.Type) == event.Catalog {
			seq = append(seq, e.Type)
		}
	}
	want := []event.Type{event.TurnStarted, event.RouteDecided, event.LLMCallStarted, event.LLMCallFailed,
		event.ContextCompacting, event.ContextCompacted, event.LLMCallStarted, event.LLMCallCompleted}
	if !slices.Equal(seq[:len(want)], want) {
		t.Fatalf("sequence %v", seq)
	}
	failed := liveEvents(t, h, sid, event.LLMCallFailed)[0]
	compacting := liveEvents(t, h, sid, event.ContextCompacting)[0]
	if failed["error_class"] != "context_overflow" || !strings.Contains(failed["message"].(string), "prompt is too long") ||
		compacting["trigger"] != "overflow" || compacting["context_window"].(float64) >= 200000 {
		t.Fatalf("llm.call_failed %v\ncontext.compacting %v", failed, compacting)
	}
	// The retried call (after the summary call, if the compaction made
	// one) sends less than the refused one.
	bodies, _ := fake.requests()
	refused := bodies[fake.overflowAt-1]
	var retried []byte
	for _, b := range bodies[fake.overflowAt:] {
		var m map[string]any
		servertest.Must(t, json.Unmarshal(b, &m))
		if m["tools"] != nil {
			retried = b
			break
		}
	}
	if len(retried) == 0 || len(retried) >= len(refused) || !strings.Contains(string(retried), "[metis ") {
		t.Fatalf("refused %d bytes, retried %d bytes:\n%.2000s", len(refused), len(retried), retried)
	}
}

// TestOpenAIOverflowIsCompactedAndRetried: OpenAI's real refusal
// (code context_length_exceeded, 400) is answered the same way.
func TestOpenAIOverflowIsCompactedAndRetried(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		bodies = append(bodies, body)
		n := len(bodies)
		mu.Unlock()
		if n == 4 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			w.Write([]byte(`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130417 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`))
			return
		}
		text := fmt.Sprintf("Answer %d.", n)
		if body["tools"] == nil {
			text = "Summary: three questions were answered."
		}
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "gpt-4.1",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}}})
		u, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{},
			"usage": map[string]any{"prompt_tokens": 1000, "completion_tokens": 10}})
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", b, u)
	}))
	defer api.Close()
	h := servertest.Start(t, "", func(c *config.Config) {
		c.Providers = config.Providers{"openai": {APIKey: "sk-test", BaseURL: api.URL + "/v1"}}
	})
	sid := createWithModel(t, h, "openai:gpt-4.1")
	// Questions long enough that a summary of three is shorter than
	// they are (the refusal's 130,417 tokens are the fake's words).
	completeTurns(t, h, sid, 4, "question %d: "+strings.Repeat("what does this long paragraph say? ", 60))
	compacted := liveEvents(t, h, sid, event.ContextCompacted)
	if len(compacted) != 1 || compacted[0]["trigger"] != "overflow" || compacted[0]["method"] != "summary" {
		t.Fatalf("context.compacted %v", compacted)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 6 || bodies[4]["tools"] != nil {
		t.Fatalf("%d requests; the fifth has tools %v", len(bodies), bodies[4]["tools"])
	}
	retry, _ := json.Marshal(bodies[5]["messages"])
	if !strings.Contains(string(retry), "Summary: three questions were answered.") || !strings.Contains(string(retry), "question 3") {
		t.Fatalf("the retried call: %s", retry)
	}
}
