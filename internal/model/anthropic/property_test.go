package anthropic

import (
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// runes the generated text favours: JSON-special, multi-byte, control.
var trickyRunes = []rune("ab \n\t\"\\/{}[]:,<>&é✓—ü日本😀\u2028\x01")

func textGen() *rapid.Generator[string] {
	return rapid.StringOf(rapid.OneOf(rapid.RuneFrom(trickyRunes), rapid.Rune()))
}

// jsonValue generates a tool-input value, nesting at most depth levels.
func jsonValue(depth int) *rapid.Generator[any] {
	leaves := []*rapid.Generator[any]{
		rapid.Map(textGen(), func(s string) any { return s }),
		rapid.Map(rapid.IntRange(-1e6, 1e6), func(i int) any { return float64(i) }),
		rapid.Map(rapid.Float64Range(-1e3, 1e3), func(f float64) any { return f }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
	}
	if depth == 0 {
		return rapid.OneOf(leaves...)
	}
	return rapid.OneOf(append(leaves,
		rapid.Map(rapid.SliceOfN(jsonValue(depth-1), 0, 3), func(s []any) any { return s }),
		rapid.Map(rapid.MapOfN(textGen(), jsonValue(depth-1), 0, 3), func(m map[string]any) any { return m }),
	)...)
}

// splitRunes cuts s at random rune boundaries into non-empty pieces.
func splitRunes(t *rapid.T, s, label string) []string {
	var bounds []int
	for i := range s {
		if i > 0 {
			bounds = append(bounds, i)
		}
	}
	if len(bounds) == 0 {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	cuts := rapid.SliceOfNDistinct(rapid.SampledFrom(bounds), 0, 12, func(i int) int { return i }).Draw(t, label)
	sort.Ints(cuts)
	var out []string
	prev := 0
	for _, c := range cuts {
		out = append(out, s[prev:c])
		prev = c
	}
	return append(out, s[prev:])
}

// propStream builds the SSE of one message: optional thinking, text, and
// tool_use blocks, each split into the given pieces.
type propStream struct {
	b     strings.Builder
	pings bool
	t     *rapid.T
}

func (p *propStream) event(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	p.b.WriteString("event: " + name + "\ndata: " + string(b) + "\n\n")
	if p.pings && rapid.IntRange(0, 4).Draw(p.t, "ping") == 0 {
		p.b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	}
}

func (p *propStream) delta(index int, delta map[string]any) {
	p.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": delta})
}

type propTool struct {
	id, name string
	input    string // the JSON the provider means
	inStart  bool   // the whole input rides on content_block_start
}

// TestPropertyChunkingInvariant: however Anthropic chunks the same
// content, the deltas reassemble (through model.Accumulator) to that
// content: the text, the thinking and its signature, and each tool input.
func TestPropertyChunkingInvariant(t *testing.T) {
	var mu sync.Mutex
	var script string
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		s := script
		mu.Unlock()
		sseHeaders(w)
		writeEvents(w, sseEvents(s))
	})
	a := newAdapter(t, f, nil)

	rapid.Check(t, func(t *rapid.T) {
		text := textGen().Draw(t, "text")
		thinking := textGen().Draw(t, "thinking")
		withThinking := rapid.Bool().Draw(t, "withThinking")
		signature := rapid.StringMatching(`[A-Za-z0-9+/]{1,40}`).Draw(t, "signature")
		var tools []propTool
		for i := range rapid.IntRange(0, 2).Draw(t, "tools") {
			obj := rapid.MapOfN(textGen(), jsonValue(2), 0, 4).Draw(t, "input")
			var raw []byte
			if rapid.Bool().Draw(t, "indent") {
				raw, _ = json.MarshalIndent(obj, "", " ")
			} else {
				raw, _ = json.Marshal(obj)
			}
			tools = append(tools, propTool{id: "toolu_" + string(rune('a'+i)), name: "tool" + string(rune('a'+i)),
				input: string(raw), inStart: rapid.Bool().Draw(t, "inStart")})
		}
		if !utf8.ValidString(text) || !utf8.ValidString(thinking) {
			t.Skip("invalid UTF-8")
		}

		p := &propStream{t: t, pings: rapid.Bool().Draw(t, "pings")}
		p.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_p", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-sonnet-4-6",
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
		index := 0
		if withThinking {
			p.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
				"content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, piece := range splitRunes(t, thinking, "thinkingCuts") {
				p.delta(index, map[string]any{"type": "thinking_delta", "thinking": piece})
			}
			p.delta(index, map[string]any{"type": "signature_delta", "signature": signature})
			p.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
			index++
		}
		textIndex := index
		p.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for _, piece := range splitRunes(t, text, "textCuts") {
			p.delta(index, map[string]any{"type": "text_delta", "text": piece})
		}
		p.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
		for _, tool := range tools {
			start := json.RawMessage("{}")
			if tool.inStart {
				start = json.RawMessage(tool.input)
			}
			p.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
				"content_block": map[string]any{"type": "tool_use", "id": tool.id, "name": tool.name, "input": start}})
			if !tool.inStart {
				p.delta(index, map[string]any{"type": "input_json_delta", "partial_json": ""})
				for _, piece := range splitRunes(t, tool.input, "inputCuts") {
					p.delta(index, map[string]any{"type": "input_json_delta", "partial_json": piece})
				}
			}
			p.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
			index++
		}
		stop := "end_turn"
		if len(tools) > 0 {
			stop = "tool_use"
		}
		p.event("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 42}})
		p.event("message_stop", map[string]any{"type": "message_stop"})

		mu.Lock()
		script = p.b.String()
		mu.Unlock()
		o := run(t.Context(), a, simpleRequest(), nil)
		if o.err != nil {
			t.Fatal(o.err)
		}
		if o.accErr != nil {
			t.Fatal(o.accErr)
		}
		if o.res.StopReason != stop || o.res.Usage.OutputTokens != 42 || o.res.Usage.InputTokens != 10 {
			t.Fatalf("result %+v", o.res)
		}
		if b, _ := o.acc.Block(textIndex); b.Text != text {
			t.Fatalf("text %q, want %q", b.Text, text)
		}
		if withThinking {
			b, _ := o.acc.Block(0)
			if b.Type != message.BlockThinking || b.Thinking != thinking || b.Signature != signature {
				t.Fatalf("thinking block %+v, want %q signed %q", b, thinking, signature)
			}
		}
		uses := o.acc.ToolUses()
		if len(uses) != len(tools) {
			t.Fatalf("%d tool uses, want %d", len(uses), len(tools))
		}
		for i, tool := range tools {
			u := uses[i]
			if u.ID != tool.id || u.Name != tool.name || o.acc.InputError(u.ID) != nil {
				t.Fatalf("tool use %+v (input error %v)", u, o.acc.InputError(u.ID))
			}
			var got, want any
			if err := json.Unmarshal(u.Input, &got); err != nil {
				t.Fatal(err)
			}
			json.Unmarshal([]byte(tool.input), &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("tool input %s, want %s", u.Input, tool.input)
			}
			// The fragments themselves reassemble to the provider's JSON.
			var frags strings.Builder
			for _, d := range o.deltas {
				if d.Kind == model.KindToolInput && d.Index == textIndex+1+i {
					frags.WriteString(d.Text)
				}
			}
			if tool.inStart && len(want.(map[string]any)) == 0 {
				if frags.Len() != 0 {
					t.Fatalf("empty start input produced fragments %q", frags.String())
				}
			} else if g := frags.String(); (!tool.inStart && g != tool.input) || (tool.inStart && !sameJSON(g, tool.input)) {
				t.Fatalf("fragments %q, want %q", g, tool.input)
			}
		}
	})
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
