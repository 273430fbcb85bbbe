package anthropic

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/metis-agent/metis/internal/model"
)

// fuzzTool is a tool_use block as the accepted events describe it.
type fuzzTool struct {
	pending  string // the start's input, when not empty
	streamed strings.Builder
	stopped  bool
}

// expectedInput is what the block's input fragments must concatenate
// to: the streamed fragments if any arrived, else the start's input
// once the block stopped.
func (f *fuzzTool) expectedInput() string {
	if f.streamed.Len() > 0 || !f.stopped {
		return f.streamed.String()
	}
	return f.pending
}

// streamModel is what the events the translator accepted carry.
type streamModel struct {
	text, thinking strings.Builder
	tools          map[int]*fuzzTool
}

func (m *streamModel) add(ev sdk.MessageStreamEventUnion) {
	switch e := ev.AsAny().(type) {
	case sdk.ContentBlockStartEvent:
		cb := e.ContentBlock
		switch cb.Type {
		case "text":
			m.text.WriteString(cb.Text)
		case "thinking":
			m.thinking.WriteString(cb.Thinking)
		case "tool_use":
			f := &fuzzTool{}
			if raw := strings.TrimSpace(cb.JSON.Input.Raw()); raw != "" && raw != "null" && !emptyObject(raw) {
				f.pending = raw
			}
			m.tools[int(e.Index)] = f
		}
	case sdk.ContentBlockDeltaEvent:
		switch e.Delta.Type {
		case "text_delta":
			m.text.WriteString(e.Delta.Text)
		case "thinking_delta":
			m.thinking.WriteString(e.Delta.Thinking)
		case "input_json_delta":
			m.tools[int(e.Index)].streamed.WriteString(e.Delta.PartialJSON)
		}
	case sdk.ContentBlockStopEvent:
		if f := m.tools[int(e.Index)]; f != nil {
			f.stopped = true
		}
	case sdk.MessageStopEvent:
		for _, f := range m.tools {
			f.stopped = true // the message's end stops them all
		}
	}
}

// streamSeeds are streams beside the recorded ones.
var streamSeeds = []string{
	// Blocks message_stop finds open (found by the fuzzer with a mangled
	// content_block_stop): a thinking block whose start carried the
	// signature, a tool_use block whose start carried the input, one
	// with streamed input, an empty text block.
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"sig\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"contenZ_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{\"a\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"g\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"b\\\":\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"2}\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	// A delta after its block's stop, and a negative index: both are now
	// refused as inconsistent (they reached clients as deltas of a
	// closed block, and as content_block_index -1).
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"a\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"late\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":-1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

// FuzzStream: any event stream, decoded by the SDK and handled as
// attempt does, never panics; the deltas name non-negative blocks, a
// block keeps its kind (a tool_use block starts with its
// KindToolUseStart), nothing follows a block's stop, no block stops
// twice, and the accumulator takes every delta; a stream that reached
// message_stop stopped every block; text and thinking are what the
// accepted events carry; and each tool_use block's input fragments
// concatenate to the streamed input (or the start's), which the
// accumulator keeps when it parses.
func FuzzStream(f *testing.F) {
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
		resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
		stream := ssestream.NewStream[event](ssestream.NewDecoder(resp), nil)
		defer stream.Close()
		var deltas []model.Delta
		tr := &translator{DeltaSink: model.DeltaSink{Ctx: context.Background(), Emit: func(d model.Delta) error {
			deltas = append(deltas, d)
			return nil
		}}, log: quiet}
		m := &streamModel{tools: map[int]*fuzzTool{}}
		var herr error
		for !tr.done && stream.Next() {
			ev := stream.Current()
			if herr = tr.handle(&ev); herr != nil {
				break
			}
			m.add(ev.union(t))
		}
		clean := herr == nil && stream.Err() == nil && tr.done
		if herr != nil {
			if me, ok := herr.(*model.Error); !ok || me.Class != model.ClassProviderError || me.Retryable {
				t.Fatalf("handle error %T %v", herr, herr)
			}
		}

		acc := &model.Accumulator{}
		kind := map[int]model.DeltaKind{}
		stopped := map[int]bool{}
		var text, thinking strings.Builder
		inputs := map[int]*strings.Builder{}
		for n, d := range deltas {
			if err := acc.Apply(d); err != nil {
				t.Fatalf("delta %d %+v: accumulator: %v", n, d, err)
			}
			if d.Index < 0 {
				t.Fatalf("delta %d %+v: negative index", n, d)
			}
			if stopped[d.Index] {
				t.Fatalf("delta %d %+v: block %d already stopped", n, d, d.Index)
			}
			k, seen := kind[d.Index]
			switch d.Kind {
			case model.KindText, model.KindThinking:
				if seen && k != d.Kind {
					t.Fatalf("delta %d %+v: into a block of kind %d", n, d, k)
				}
				kind[d.Index] = d.Kind
				if d.Kind == model.KindText {
					text.WriteString(d.Text)
				} else {
					thinking.WriteString(d.Text)
				}
			case model.KindToolUseStart:
				if seen {
					t.Fatalf("delta %d %+v: block %d already of kind %d", n, d, d.Index, k)
				}
				kind[d.Index] = d.Kind
				inputs[d.Index] = &strings.Builder{}
			case model.KindToolInput:
				if k != model.KindToolUseStart {
					t.Fatalf("delta %d %+v: tool input into a block of kind %d", n, d, k)
				}
				inputs[d.Index].WriteString(d.Text)
			case model.KindBlockStop:
				// A block may stop without a delta (an empty text block).
				stopped[d.Index] = true
			default:
				t.Fatalf("delta %d %+v: kind %d", n, d, d.Kind)
			}
		}
		if clean {
			for i := range tr.blocks {
				if !stopped[i] {
					t.Fatalf("message_stop left block %d (%s) open", i, tr.blocks[i].typ)
				}
			}
		}
		if text.String() != m.text.String() || thinking.String() != m.thinking.String() {
			t.Fatalf("text %q thinking %q, the stream's %q %q", text.String(), thinking.String(), m.text.String(), m.thinking.String())
		}
		if len(inputs) != len(m.tools) {
			t.Fatalf("%d tool_use blocks, the stream has %d", len(inputs), len(m.tools))
		}
		for i, ft := range m.tools {
			want := ft.expectedInput()
			if got := inputs[i]; got == nil || got.String() != want {
				t.Fatalf("block %d input %v, the stream's %q", i, got, want)
			}
			if !stopped[i] {
				continue
			}
			b, _ := acc.Block(i)
			if in, err := model.ParseToolInput(want); err == nil && string(b.Input) != string(in) {
				t.Fatalf("block %d accumulated %s, the stream's %s", i, b.Input, in)
			}
		}
	})
}
