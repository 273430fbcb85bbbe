package server_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// cachingAnthropic is a fake Anthropic Messages API that accounts for
// prompt caching the way the API documents it: the prompt is the tools,
// then the system blocks, then the messages' blocks, in that order; a
// block marked cache_control is a breakpoint; a request reads from the
// cache the longest prefix, ending at one of its breakpoints or up to 20
// blocks before one, that an earlier request wrote; it writes the
// prefixes up to each of its breakpoints; prefixes under 1,024 tokens
// are never cached. Tokens are four bytes of a block's JSON. Usage
// reports input_tokens (after the last breakpoint, plus everything when
// nothing is cached), cache_read_input_tokens and
// cache_creation_input_tokens as the API does.
//
// It answers a user message with a read_file call, a tool result with
// text, and a summary request (no tools) with a summary; overflow, when
// set, is the body of a 400 answer to request overflowAt (1-based).
type cachingAnthropic struct {
	overflow   string
	overflowAt int

	mu     sync.Mutex
	cached map[[32]byte]bool
	bodies [][]byte
	usage  []map[string]int
}

const (
	minCacheTokens = 1024
	lookback       = 20
)

func newCachingAnthropic() *cachingAnthropic {
	return &cachingAnthropic{cached: map[[32]byte]bool{}}
}

// promptBlocks returns the prompt's blocks in cache order, as JSON, and
// whether each is a breakpoint.
func promptBlocks(req map[string]any) (blocks []string, marks []bool) {
	add := func(v any) {
		// The breakpoint itself is not content: a prefix written with
		// the mark on its last block is read by a request that has
		// moved the mark on.
		m, _ := v.(map[string]any)
		_, mark := m["cache_control"]
		c := map[string]any{}
		for k, x := range m {
			if k != "cache_control" {
				c[k] = x
			}
		}
		b, _ := json.Marshal(c)
		blocks = append(blocks, string(b))
		marks = append(marks, mark)
	}
	for _, t := range asList(req["tools"]) {
		add(t)
	}
	for _, s := range asList(req["system"]) {
		add(s)
	}
	for _, m := range asList(req["messages"]) {
		mm := m.(map[string]any)
		switch c := mm["content"].(type) {
		case string:
			add(map[string]any{"type": "text", "text": c, "role": mm["role"]})
		default:
			for _, b := range asList(c) {
				add(b)
			}
		}
	}
	return blocks, marks
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func tokens(s string) int { return (len(s) + 3) / 4 }

// account computes a request's usage and records what it writes.
func (f *cachingAnthropic) account(req map[string]any) map[string]int {
	blocks, marks := promptBlocks(req)
	prefix := make([][32]byte, len(blocks)) // hash of blocks[:i+1]
	cum := make([]int, len(blocks))         // tokens of blocks[:i+1]
	h := sha256.New()
	total := 0
	for i, b := range blocks {
		h.Write([]byte(b))
		copy(prefix[i][:], h.Sum(nil))
		total += tokens(b)
		cum[i] = total
	}
	last := -1
	for i, m := range marks {
		if m {
			last = i
		}
	}
	if last < 0 || cum[last] < minCacheTokens {
		return map[string]int{"input_tokens": total}
	}
	hit := -1 // the end of the longest cached prefix
	for i, m := range marks {
		if !m {
			continue
		}
		for j := i; j >= 0 && j >= i-lookback; j-- {
			if f.cached[prefix[j]] && j > hit {
				hit = j
				break
			}
		}
	}
	for i, m := range marks {
		if m && cum[i] >= minCacheTokens {
			f.cached[prefix[i]] = true
		}
	}
	read := 0
	if hit >= 0 {
		read = cum[hit]
	}
	return map[string]int{"cache_read_input_tokens": read, "cache_creation_input_tokens": cum[last] - read,
		"input_tokens": total - cum[last]}
}

func (f *cachingAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	n := len(f.bodies)
	if n == f.overflowAt && f.overflow != "" {
		f.usage = append(f.usage, nil)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, f.overflow)
		return
	}
	u := f.account(req)
	f.usage = append(f.usage, u)
	f.mu.Unlock()

	msgs := asList(req["messages"])
	lastBlock := map[string]any{}
	if c := asList(msgs[len(msgs)-1].(map[string]any)["content"]); len(c) > 0 {
		lastBlock, _ = c[len(c)-1].(map[string]any)
	}
	start := map[string]any{"input_tokens": u["input_tokens"], "output_tokens": 1}
	for k, v := range u {
		start[k] = v
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message",
		"role": "assistant", "content": []any{}, "model": req["model"], "usage": start}})
	text := func(s string) {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		blockDelta(w, 0, map[string]any{"type": "text_delta", "text": s})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	}
	stop := "end_turn"
	switch {
	case req["tools"] == nil:
		text("Summary: the user asked about the notes file, which was read several times.")
	case lastBlock["type"] == "tool_result":
		text("The notes file is about builds and caches.")
	default:
		text("Let me read the notes.")
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "tool_use",
			"id": fmt.Sprintf("toolu_%03d", n), "name": "read_file", "input": map[string]any{}}})
		blockDelta(w, 1, map[string]any{"type": "input_json_delta", "partial_json": `{"path": "notes.txt"}`})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 1})
		stop = "tool_use"
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]any{"output_tokens": 20}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

func (f *cachingAnthropic) requests() ([][]byte, []map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...), append([]map[string]int(nil), f.usage...)
}
