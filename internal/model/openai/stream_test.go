package openai

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

func text(i int, s string) model.Delta { return model.Delta{Kind: model.KindText, Index: i, Text: s} }
func thinking(i int, s string) model.Delta {
	return model.Delta{Kind: model.KindThinking, Index: i, Text: s}
}
func start(i int, id, name string) model.Delta {
	return model.Delta{Kind: model.KindToolUseStart, Index: i, ToolUseID: id, ToolName: name}
}
func input(i int, s string) model.Delta {
	return model.Delta{Kind: model.KindToolInput, Index: i, Text: s}
}
func stop(i int) model.Delta { return model.Delta{Kind: model.KindBlockStop, Index: i} }

func checkDeltas(t *testing.T, got, want []model.Delta) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("deltas:\n%s\nwant:\n%s", deltasString(got), deltasString(want))
	}
}

func TestPlainText(t *testing.T) {
	fs := newServer(t, replay(t, "text.sse"))
	a := fs.adapter(t, nil)
	got, res, acc, err := run(t, a, context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, got, []model.Delta{text(0, "Hello"), text(0, "! How"), text(0, " can I"), text(0, " help 🙂"), text(0, " you today?"), stop(0)})
	if res.StopReason != model.StopEndTurn {
		t.Errorf("stop %q", res.StopReason)
	}
	if want := (message.Usage{InputTokens: 19, OutputTokens: 10}); res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if c := acc.Content(); len(c) != 1 || c[0].Text != "Hello! How can I help 🙂 you today?" {
		t.Errorf("content %+v", c)
	}
	if fs.requests() != 1 || fs.paths[0] != "/v1/chat/completions" {
		t.Errorf("requests %d, paths %v", fs.requests(), fs.paths)
	}
	if h := fs.headers[0].Get("Authorization"); h != "Bearer sk-test" {
		t.Errorf("Authorization %q", h)
	}
}

func TestParallelToolCallsSplitMidToken(t *testing.T) {
	fs := newServer(t, replay(t, "parallel_tools.sse"))
	got, res, acc, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, got, []model.Delta{
		start(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather"),
		input(0, `{"lo`), input(0, `cation": "Par`), input(0, `is, Fr`), input(0, `ance"}`),
		start(1, "call_Y6kOQcl4XbPn2YvFj5Qb1b0v", "get_time"),
		input(1, `{"tz`), input(1, `": "Europe/Par`), input(1, `is"}`),
		stop(0), stop(1),
	})
	if res.StopReason != model.StopToolUse {
		t.Errorf("stop %q", res.StopReason)
	}
	// The usage chunk (choices: []) after finish_reason: cached tokens
	// are counted apart from the uncached input.
	if want := (message.Usage{InputTokens: 56, OutputTokens: 40, CacheReadTokens: 64}); res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	uses := acc.ToolUses()
	if len(uses) != 2 || string(uses[0].Input) != `{"location": "Paris, France"}` || string(uses[1].Input) != `{"tz": "Europe/Paris"}` {
		t.Errorf("tool uses %+v", uses)
	}
}

func TestUsageChunkAtEndIsNotADelta(t *testing.T) {
	// Everything up to finish_reason, then only the usage chunk: it adds
	// usage and no delta.
	evs := events(t, "text.sse")
	fs := newServer(t, serveEvents(evs...))
	got, res, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	fs2 := newServer(t, serveEvents(append(append([]string{}, evs[:len(evs)-2]...), doneEvent)...))
	got2, res2, _, err := run(t, fs2.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, got2, got)
	if res.Usage.InputTokens != 19 || res2.Usage != (message.Usage{}) {
		t.Errorf("usage with chunk %+v, without %+v", res.Usage, res2.Usage)
	}
	if res2.StopReason != model.StopEndTurn {
		t.Errorf("stop %q", res2.StopReason)
	}
}

func TestCompatServerVaryingIDsAndStopWithToolCalls(t *testing.T) {
	fs := newServer(t, replay(t, "compat_varying_ids.sse"))
	got, res, acc, err := run(t, fs.adapter(t, func(o *Options) { o.APIKey = "" }), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, got, []model.Delta{
		text(0, "I'll check"), text(0, " both files."),
		start(1, "call_k3j2x9aa", "read_file"), input(1, `{"path":"README.md"}`),
		start(2, "call_7hq0mm2b", "read_file"), input(2, `{"path":`), input(2, ` "go.mod"}`),
		stop(0), stop(1), stop(2),
	})
	if res.StopReason != model.StopToolUse {
		t.Errorf("stop %q; want tool_use for tool calls ended with \"stop\"", res.StopReason)
	}
	if want := (message.Usage{InputTokens: 312, OutputTokens: 58}); res.Usage != want {
		t.Errorf("usage on the last choice chunk: %+v, want %+v", res.Usage, want)
	}
	uses := acc.ToolUses()
	if len(uses) != 2 || string(uses[1].Input) != `{"path": "go.mod"}` {
		t.Errorf("tool uses %+v", uses)
	}
	if h := fs.headers[0].Get("Authorization"); h != "" {
		t.Errorf("no API key, yet Authorization %q", h)
	}
}

func TestArgumentsWholeInFirstChunk(t *testing.T) {
	fs := newServer(t, replay(t, "whole_args.sse"))
	got, res, acc, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, got, []model.Delta{
		start(0, "chatcmpl-tool-5c1e0b", "list_dir"), input(0, `{"path": ".", "depth": 2}`), stop(0),
	})
	if res.StopReason != model.StopToolUse || res.Usage != (message.Usage{InputTokens: 210, OutputTokens: 28}) {
		t.Errorf("result %+v", res)
	}
	if u := acc.ToolUses(); len(u) != 1 || string(u[0].Input) != `{"path": ".", "depth": 2}` {
		t.Errorf("tool uses %+v", u)
	}
}

func TestReasoningContentBecomesThinking(t *testing.T) {
	fs := newServer(t, replay(t, "reasoning.sse"))
	got, res, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, got, []model.Delta{
		thinking(0, "The user says hi."), thinking(0, " Greet back."), text(1, "Hi there!"), stop(0), stop(1),
	})
	if res.StopReason != model.StopEndTurn || res.Usage != (message.Usage{InputTokens: 8, OutputTokens: 12}) {
		t.Errorf("result %+v", res)
	}
}

// Odd servers: no tool-call index (calls told apart by id), a name
// arriving before the id is known is fine, arguments before the name are
// held back, arguments sent as an object, an index reused for a new
// call, and a stream that ends without finish_reason or [DONE].
func TestToleratesOddToolCallChunks(t *testing.T) {
	chunk := func(delta map[string]any) string {
		return dataEvent(map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta}}})
	}
	tc := func(fields map[string]any) map[string]any { return map[string]any{"tool_calls": []any{fields}} }
	fs := newServer(t, serveEvents(
		// no index, id + name
		chunk(tc(map[string]any{"id": "a", "type": "function", "function": map[string]any{"name": "f", "arguments": `{"x":`}})),
		chunk(tc(map[string]any{"function": map[string]any{"arguments": `1}`}})),
		// a second call without index, told apart by its id
		chunk(tc(map[string]any{"id": "b", "function": map[string]any{"name": "g", "arguments": map[string]any{"y": 2}}})),
		// index 5: arguments before the name
		chunk(tc(map[string]any{"index": 5, "function": map[string]any{"arguments": `{"z"`}})),
		chunk(tc(map[string]any{"index": 5, "id": "c", "function": map[string]any{"name": "h", "arguments": `:3}`}})),
		// index 5 reused for a new call
		chunk(tc(map[string]any{"index": 5, "id": "d", "function": map[string]any{"name": "k", "arguments": `{}`}})),
	))
	got, res, acc, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, got, []model.Delta{
		start(0, "a", "f"), input(0, `{"x":`), input(0, `1}`),
		start(1, "b", "g"), input(1, `{"y":2}`),
		start(2, "c", "h"), input(2, `{"z":3}`),
		start(3, "d", "k"), input(3, `{}`),
		stop(0), stop(1), stop(2), stop(3),
	})
	if res.StopReason != model.StopToolUse {
		t.Errorf("stop %q", res.StopReason)
	}
	for _, u := range acc.ToolUses() {
		if !json.Valid(u.Input) {
			t.Errorf("input %s", u.Input)
		}
	}
}

func TestFinishReasonMapping(t *testing.T) {
	for reason, want := range map[string]string{
		"stop": model.StopEndTurn, "length": model.StopMaxTokens, "tool_calls": model.StopEndTurn,
		"content_filter": model.StopEndTurn, "function_call": model.StopEndTurn, "eos": model.StopEndTurn,
	} {
		t.Run(reason, func(t *testing.T) {
			fs := newServer(t, serveEvents(textChunk("a"), dataEvent(map[string]any{"id": "x", "object": "chat.completion.chunk",
				"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": reason}}}), doneEvent))
			got, res, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
			if err != nil {
				t.Fatal(err)
			}
			checkDeltas(t, got, []model.Delta{text(0, "a"), stop(0)})
			if res.StopReason != want {
				t.Errorf("finish_reason %q: stop %q, want %q", reason, res.StopReason, want)
			}
		})
	}
}

func TestEmptyStreamIsAnError(t *testing.T) {
	fs := newServer(t, serveEvents(doneEvent))
	_, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	me := asModelError(t, err)
	if me.Class != model.ClassProviderError || fs.requests() != 3 {
		t.Errorf("class %s after %d requests: %v", me.Class, fs.requests(), err)
	}
}

func TestEmitErrorStopsTheStream(t *testing.T) {
	h := newHolder()
	fs := newServer(t, h.handler(events(t, "text.sse")[:4]...))
	a := fs.adapter(t, nil)
	boom := &model.Error{Class: model.ClassProviderError, Message: "client gone"}
	n := 0
	_, err := a.Stream(context.Background(), simpleReq(), func(d model.Delta) error {
		n++
		if n == 2 {
			return boom
		}
		return nil
	})
	if err != boom || n != 2 {
		t.Fatalf("err %v after %d deltas; want the emit error after 2", err, n)
	}
	h.waitGone(t)
	if fs.requests() != 1 {
		t.Errorf("%d requests", fs.requests())
	}
	if !strings.Contains(err.Error(), "client gone") {
		t.Error(err)
	}
}

// vLLM ends with a usage chunk whose choices is null; others omit the
// key. Both count.
func TestUsageChunkWithNullOrMissingChoices(t *testing.T) {
	for name, usage := range map[string]map[string]any{
		"null":    {"id": "u", "object": "chat.completion.chunk", "choices": nil, "usage": map[string]any{"prompt_tokens": 7, "completion_tokens": 3}},
		"missing": {"id": "u", "object": "chat.completion.chunk", "usage": map[string]any{"prompt_tokens": 7, "completion_tokens": 3}},
	} {
		t.Run(name, func(t *testing.T) {
			fs := newServer(t, serveEvents(textChunk("a"), dataEvent(map[string]any{"id": "x", "object": "chat.completion.chunk",
				"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}}), dataEvent(usage), doneEvent))
			got, res, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
			if err != nil {
				t.Fatal(err)
			}
			checkDeltas(t, got, []model.Delta{text(0, "a"), stop(0)})
			if res.Usage != (message.Usage{InputTokens: 7, OutputTokens: 3}) {
				t.Errorf("usage %+v", res.Usage)
			}
		})
	}
}
