package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/metis-agent/metis/internal/model"
)

// fuzzRun is one stream fed through the SDK's event-stream decoding and
// the translator, as attempt does it, without HTTP.
type fuzzRun struct {
	deltas []model.Delta
	chunks []sdk.ChatCompletionChunk
	tr     *translator
	clean  bool // the stream ended without an error and finish ran
}

func runStream(t *testing.T, body []byte) fuzzRun {
	t.Helper()
	var r fuzzRun
	resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
	stream := ssestream.NewStream[sdk.ChatCompletionChunk](ssestream.NewDecoder(resp), nil)
	defer stream.Close()
	r.tr = newTranslator(context.Background(), func(d model.Delta) error {
		r.deltas = append(r.deltas, d)
		return nil
	}, quietLogger())
	for stream.Next() {
		c := stream.Current()
		r.chunks = append(r.chunks, c)
		fc := fromFull(&c)
		if err := r.tr.chunk(&fc); err != nil {
			t.Fatalf("chunk %d: %v", len(r.chunks), err)
		}
	}
	if stream.Err() == nil && r.tr.sawChunk {
		if err := r.tr.finish(); err != nil {
			t.Fatalf("finish: %v", err)
		}
		r.clean = true
	}
	return r
}

// checkBlocks checks the block discipline of a delta sequence: indexes
// are handed out 0, 1, 2... in order of first appearance; a block keeps
// one kind (a tool_use block starts with its KindToolUseStart); no delta
// follows a block's stop and no block stops twice; the accumulator takes
// every delta. When the stream ended cleanly, every block stopped, in
// index order. It returns the accumulator.
func checkBlocks(t *testing.T, ds []model.Delta, clean bool) *model.Accumulator {
	t.Helper()
	acc := &model.Accumulator{}
	kind := map[int]model.DeltaKind{} // the block's content kind
	stopped := map[int]bool{}
	var stops []int
	for n, d := range ds {
		if err := acc.Apply(d); err != nil {
			t.Fatalf("delta %d %+v: accumulator: %v", n, d, err)
		}
		k, seen := kind[d.Index]
		if !seen {
			if d.Index != len(kind) {
				t.Fatalf("delta %d %+v: new block %d after %d blocks", n, d, d.Index, len(kind))
			}
			switch d.Kind {
			case model.KindText, model.KindThinking, model.KindToolUseStart:
			default:
				t.Fatalf("delta %d %+v: block %d begins with kind %d", n, d, d.Index, d.Kind)
			}
			// A call that never got a name starts nameless at the end
			// (so that it fails visibly); every call has an id.
			if d.Kind == model.KindToolUseStart && d.ToolUseID == "" {
				t.Fatalf("delta %d %+v: tool use without an id", n, d)
			}
			kind[d.Index] = d.Kind
			continue
		}
		if stopped[d.Index] {
			t.Fatalf("delta %d %+v: block %d already stopped", n, d, d.Index)
		}
		switch d.Kind {
		case model.KindBlockStop:
			stopped[d.Index] = true
			stops = append(stops, d.Index)
		case model.KindToolInput:
			if k != model.KindToolUseStart {
				t.Fatalf("delta %d %+v: tool input into a block of kind %d", n, d, k)
			}
		case model.KindText, model.KindThinking:
			if k != d.Kind {
				t.Fatalf("delta %d %+v: into a block of kind %d", n, d, k)
			}
		default:
			t.Fatalf("delta %d %+v: kind %d", n, d, d.Kind)
		}
	}
	if clean {
		if len(stops) != len(kind) {
			t.Fatalf("a clean stream stopped %d of %d blocks: %v", len(stops), len(kind), stops)
		}
		for i, s := range stops {
			if s != i {
				t.Fatalf("stops out of index order: %v", stops)
			}
		}
	}
	return acc
}

// expectedCall is a tool call as the chunks describe it.
type expectedCall struct {
	id, name, args string
	startID        string // the id when the call started
}

// expectedText returns the text the chunks carry: choice 0's content
// and refusal, in order.
func expectedText(chunks []sdk.ChatCompletionChunk) string {
	var b strings.Builder
	for i := range chunks {
		for _, ch := range chunks[i].Choices {
			if ch.Index == 0 {
				b.WriteString(ch.Delta.Content)
				b.WriteString(ch.Delta.Refusal)
			}
		}
	}
	return b.String()
}

// expectedCalls models the tool calls of streams whose entries all
// carry an index and never reuse one for another id: per index, the
// first id (as of the call's start) and name and the concatenated arguments of the entries up to
// finish_reason, in the order the calls get their name (when they
// start). ok is false for other streams.
func expectedCalls(chunks []sdk.ChatCompletionChunk, clean bool) (calls []*expectedCall, ok bool) {
	byIndex := map[int64]*expectedCall{}
	var order []int64 // indexes, in order of first appearance
	started := map[int64]bool{}
	var starts []int64
	finished := false
	for i := range chunks {
		for _, ch := range chunks[i].Choices {
			if ch.Index != 0 || finished {
				continue
			}
			for _, tc := range ch.Delta.ToolCalls {
				if !tc.JSON.Index.Valid() {
					return nil, false
				}
				c := byIndex[tc.Index]
				if c == nil {
					c = &expectedCall{}
					byIndex[tc.Index] = c
					order = append(order, tc.Index)
				}
				if tc.ID != "" && c.id != "" && tc.ID != c.id {
					return nil, false
				}
				if c.id == "" {
					c.id = tc.ID
				}
				if c.name == "" {
					c.name = tc.Function.Name
				}
				args := tc.Function.Arguments
				if f := tc.Function.JSON.Arguments; !f.Valid() && strings.HasPrefix(strings.TrimSpace(f.Raw()), "{") {
					args = f.Raw()
				}
				c.args += args
				if c.name != "" && !started[tc.Index] {
					started[tc.Index] = true
					starts = append(starts, tc.Index)
					c.startID = c.id // an id arriving later is not the call's
				}
			}
			if ch.FinishReason != "" {
				finished = true
			}
		}
	}
	for _, k := range starts {
		calls = append(calls, byIndex[k])
	}
	// Calls that never got a name start last, nameless, in the order
	// they first appeared, with the id they had by then, once the tool
	// calls are closed (finish_reason or a clean end).
	for _, k := range order {
		if !started[k] && (finished || clean) {
			c := byIndex[k]
			c.startID = c.id
			calls = append(calls, c)
		}
	}
	return calls, true
}

// streamSeeds are streams beside the recorded ones: the odd shapes the
// translator handles, and content after finish_reason.
var streamSeeds = []string{
	// A call that never gets a name, beside one that does: it starts
	// nameless at finish_reason.
	`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c_nameless","function":{"arguments":"{\"p\":1}"}},{"index":1,"id":"c_named","function":{"name":"f","arguments":"{}"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n",
	// Arguments before the name, an unindexed call matched by id, one
	// sent as an object, one with neither id nor index.
	`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c0","function":{"name":"f","arguments":"1}"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"name":"g","arguments":{"b":2}}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"h","arguments":"{}"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"arguments":""}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n",
	// An index reused for a new call, a call never named, a second
	// choice, a usage chunk.
	`data: {"choices":[{"index":0,"delta":{"content":"hi","tool_calls":[{"index":3,"id":"a","function":{"name":"f","arguments":"{"}}]}},{"index":1,"delta":{"content":"other"}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"b","function":{"name":"g","arguments":"{}"}},{"index":4,"function":{"arguments":"{}"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"refusal":"no"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":9}}}` + "\n\n",
	// Content, reasoning and tool calls after finish_reason.
	`data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"content":"b","reasoning_content":"r","tool_calls":[{"index":0,"id":"x","function":{"name":"f"}}]}}]}` + "\n\n",
	// Reasoning in both spellings, no finish_reason.
	`data: {"choices":[{"index":0,"delta":{"reasoning":"think"}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"reasoning_content":"more","content":"answer"}}]}` + "\n\n",
}

// FuzzTranslate: any event stream, decoded by the SDK and translated
// as attempt does, never panics; the adapter's decoding (chunk) and the
// SDK's full decode translate it alike; its deltas keep the block discipline
// (checkBlocks); the text deltas are the stream's content; and for
// streams whose tool calls all carry an index, each call with a name
// (and, last, each call that never got one, nameless) starts one
// tool_use block whose input fragments concatenate to the
// call's arguments, and the accumulated input is those arguments when
// they parse.
func FuzzTranslate(f *testing.F) {
	recorded, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil || len(recorded) == 0 {
		f.Fatalf("recorded streams: %v %v", recorded, err)
	}
	for _, name := range recorded {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range streamSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := runStream(t, body)
		sameTranslation(t, "fuzz", runFast(t, body), r)
		acc := checkBlocks(t, r.deltas, r.clean)

		var text strings.Builder
		var starts []model.Delta
		inputs := map[int]*strings.Builder{}
		for _, d := range r.deltas {
			switch d.Kind {
			case model.KindText:
				text.WriteString(d.Text)
			case model.KindToolUseStart:
				starts = append(starts, d)
				inputs[d.Index] = &strings.Builder{}
			case model.KindToolInput:
				inputs[d.Index].WriteString(d.Text)
			}
		}
		if want := expectedText(r.chunks); text.String() != want {
			t.Fatalf("text %q, the stream's %q", text.String(), want)
		}
		if r.tr.started != len(starts) {
			t.Fatalf("%d tool calls counted, %d started", r.tr.started, len(starts))
		}
		calls, ok := expectedCalls(r.chunks, r.clean)
		if !ok {
			return
		}
		if len(calls) != len(starts) {
			t.Fatalf("%d tool calls started, the stream has %d", len(starts), len(calls))
		}
		for i, c := range calls {
			d := starts[i]
			id := c.startID
			if d.ToolName != c.name || (id != "" && d.ToolUseID != id) || (id == "" && !strings.HasPrefix(d.ToolUseID, "call_metis_")) {
				t.Fatalf("call %d started as %q %q, the stream's %q %q", i, d.ToolUseID, d.ToolName, id, c.name)
			}
			got := inputs[d.Index].String()
			if got != c.args {
				t.Fatalf("call %d input %q, the stream's %q", i, got, c.args)
			}
			if !r.clean {
				continue
			}
			b, _ := acc.Block(d.Index)
			if in, err := model.ParseToolInput(c.args); err == nil && string(b.Input) != string(in) {
				t.Fatalf("call %d accumulated %s, the stream's %s", i, b.Input, in)
			}
		}
	})
}
