package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// splitRunes cuts s into pieces at random rune boundaries.
func splitRunes(t *rapid.T, s, label string) []string {
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return nil
	}
	var bounds []int // byte offsets of rune starts, after the first
	for i := range s {
		if i > 0 {
			bounds = append(bounds, i)
		}
	}
	cuts := rapid.SliceOfNDistinct(rapid.IntRange(0, max(len(bounds)-1, 0)), 0, min(len(bounds), 8), rapid.ID[int]).Draw(t, label+" cuts")
	if len(bounds) == 0 {
		cuts = nil
	}
	sort.Ints(cuts)
	var out []string
	prev := 0
	for _, c := range cuts {
		out = append(out, s[prev:bounds[c]])
		prev = bounds[c]
	}
	return append(out, s[prev:])
}

// jsonValue draws a JSON-able value of limited depth.
func jsonValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kinds := 4
		if depth > 0 {
			kinds = 6
		}
		switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
		case 0:
			return rapid.String().Draw(t, "s")
		case 1:
			return float64(rapid.IntRange(-1e6, 1e6).Draw(t, "n"))
		case 2:
			return rapid.Bool().Draw(t, "b")
		case 3:
			return nil
		case 4:
			return rapid.SliceOfN(jsonValue(depth-1), 0, 3).Draw(t, "list")
		default:
			return rapid.MapOfN(rapid.String(), jsonValue(depth-1), 0, 3).Draw(t, "obj")
		}
	})
}

type propEvent struct {
	stream int // 0: text; 1..n: tool call n-1
	piece  string
	first  bool // a tool call's first entry: carries id and name
}

type propCall struct {
	id, name string
	args     map[string]any
	pieces   []string
}

// TestPropertyChunkingDoesNotMatter: the same content, chunked at random
// rune boundaries, with 1-3 parallel tool calls interleaved by index,
// varying chunk ids, and the usage chunk or finish_reason in any of the
// forms servers use, always accumulates to the same text and inputs.
func TestPropertyChunkingDoesNotMatter(t *testing.T) {
	var script atomic.Pointer[[]string]
	fs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		serveEvents(*script.Load()...)(w, r)
	})
	a := fs.adapter(t, nil)

	rapid.Check(t, func(rt *rapid.T) {
		text := rapid.String().Draw(rt, "text")
		textPieces := splitRunes(rt, text, "text")
		n := rapid.IntRange(1, 3).Draw(rt, "calls")
		calls := make([]propCall, n)
		for i := range calls {
			c := &calls[i]
			c.id = fmt.Sprintf("call_%d_%s", i, rapid.StringMatching(`[A-Za-z0-9]{4,12}`).Draw(rt, "id"))
			c.name = rapid.StringMatching(`[a-z_]{1,16}`).Draw(rt, "name")
			c.args = rapid.MapOfN(rapid.String(), jsonValue(2), 0, 4).Draw(rt, "args")
			raw, _ := json.Marshal(c.args)
			if rapid.Bool().Draw(rt, "indent") {
				raw, _ = json.MarshalIndent(c.args, "", " ")
			}
			c.pieces = splitRunes(rt, string(raw), "args")
		}

		// The events of each stream, in order; a call's first entry
		// carries id and name, with its first piece or with none.
		queues := make([][]propEvent, n+1)
		for _, p := range textPieces {
			queues[0] = append(queues[0], propEvent{stream: 0, piece: p})
		}
		for i, c := range calls {
			pieces := c.pieces
			if rapid.Bool().Draw(rt, "args with name") {
				queues[i+1] = append(queues[i+1], propEvent{stream: i + 1, piece: pieces[0], first: true})
				pieces = pieces[1:]
			} else {
				queues[i+1] = append(queues[i+1], propEvent{stream: i + 1, first: true})
			}
			for _, p := range pieces {
				queues[i+1] = append(queues[i+1], propEvent{stream: i + 1, piece: p})
			}
		}
		// Interleave: text and calls in order of a random merge; calls
		// start in index order, as servers number them.
		var order []propEvent
		started := 0
		for {
			var live []int
			for s, q := range queues {
				if len(q) == 0 || (s > 0 && queues[s][0].first && s != started+1) {
					continue
				}
				live = append(live, s)
			}
			if len(live) == 0 {
				break
			}
			s := live[rapid.IntRange(0, len(live)-1).Draw(rt, "next")]
			if queues[s][0].first {
				started++
			}
			order = append(order, queues[s][0])
			queues[s] = queues[s][1:]
		}

		// Chunks: consecutive events share a chunk at random, unless two
		// of them are text or the same call.
		repeatID := rapid.Bool().Draw(rt, "repeat ids")
		varyID := rapid.Bool().Draw(rt, "vary chunk ids")
		var evs []string
		chunkN := 0
		mk := func(delta map[string]any, finish any, usage any) string {
			chunkN++
			id := "chatcmpl-prop"
			if varyID {
				id = fmt.Sprintf("chatcmpl-%d", chunkN)
			}
			c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
			if usage != nil {
				c["usage"] = usage
			}
			return dataEvent(c)
		}
		var delta map[string]any
		var inDelta map[int]bool
		flush := func() {
			if delta != nil {
				evs = append(evs, mk(delta, nil, nil))
			}
			delta, inDelta = nil, nil
		}
		for _, e := range order {
			if delta == nil || inDelta[e.stream] || rapid.Bool().Draw(rt, "new chunk") {
				flush()
				delta, inDelta = map[string]any{"role": "assistant"}, map[int]bool{}
			}
			inDelta[e.stream] = true
			if e.stream == 0 {
				delta["content"] = e.piece
				continue
			}
			c := calls[e.stream-1]
			fn := map[string]any{"arguments": e.piece}
			entry := map[string]any{"index": e.stream - 1, "function": fn}
			if e.first {
				entry["id"], entry["type"], fn["name"] = c.id, "function", c.name
			} else if repeatID {
				entry["id"] = c.id
			}
			tcs, _ := delta["tool_calls"].([]any)
			delta["tool_calls"] = append(tcs, entry)
		}
		finish := rapid.SampledFrom([]string{"tool_calls", "stop"}).Draw(rt, "finish")
		usage := map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
		switch rapid.IntRange(0, 3).Draw(rt, "ending") {
		case 0: // finish on the last content chunk, usage chunk after
			if delta == nil {
				delta = map[string]any{}
			}
			evs = append(evs, mk(delta, finish, nil))
			delta = nil
			evs = append(evs, dataEvent(map[string]any{"id": "u", "object": "chat.completion.chunk", "choices": []any{}, "usage": usage}))
		case 1: // finish chunk of its own carrying usage
			flush()
			evs = append(evs, mk(map[string]any{}, finish, usage))
		case 2: // finish chunk, then the usage chunk
			flush()
			evs = append(evs, mk(map[string]any{}, finish, nil))
			evs = append(evs, dataEvent(map[string]any{"id": "u", "object": "chat.completion.chunk", "choices": []any{}, "usage": usage}))
		default: // no finish_reason, no usage
			flush()
			usage = nil
		}
		evs = append(evs, doneEvent)
		script.Store(&evs)

		var deltas []model.Delta
		acc := &model.Accumulator{}
		res, err := a.Stream(context.Background(), simpleReq(), func(d model.Delta) error {
			deltas = append(deltas, d)
			return acc.Apply(d)
		})
		if err != nil {
			rt.Fatalf("stream: %v\n%s", err, strings.Join(evs, ""))
		}

		var gotText strings.Builder
		uses := map[string]message.Block{}
		for _, b := range acc.Content() {
			switch b.Type {
			case message.BlockText:
				gotText.WriteString(b.Text)
			case message.BlockToolUse:
				uses[b.ID] = b
				if err := acc.InputError(b.ID); err != nil {
					rt.Fatalf("input of %s did not parse: %v", b.ID, err)
				}
			default:
				rt.Fatalf("unexpected block %+v", b)
			}
		}
		if gotText.String() != text {
			rt.Fatalf("text %q, want %q", gotText.String(), text)
		}
		if len(uses) != n {
			rt.Fatalf("%d tool uses, want %d", len(uses), n)
		}
		for _, c := range calls {
			u, ok := uses[c.id]
			if !ok || u.Name != c.name {
				rt.Fatalf("tool use %s: %+v", c.id, u)
			}
			var in map[string]any
			if err := json.Unmarshal(u.Input, &in); err != nil {
				rt.Fatalf("input %s: %v", u.Input, err)
			}
			want := c.args
			if want == nil {
				want = map[string]any{}
			}
			if !reflect.DeepEqual(in, want) {
				rt.Fatalf("input %s of %s, want %v", u.Input, c.id, want)
			}
		}
		// Every block closed once, at the end, in index order.
		var stops []int
		for i, d := range deltas {
			if d.Kind == model.KindBlockStop {
				stops = append(stops, d.Index)
			} else if len(stops) > 0 {
				rt.Fatalf("delta %d %+v after a block stop", i, d)
			}
		}
		blocks := len(acc.Content())
		for i, s := range stops {
			if s != i {
				rt.Fatalf("block stops %v for %d blocks", stops, blocks)
			}
		}
		if len(stops) != blocks {
			rt.Fatalf("block stops %v for %d blocks", stops, blocks)
		}
		if res.StopReason != model.StopToolUse {
			rt.Fatalf("stop %q", res.StopReason)
		}
		if usage != nil && (res.Usage.InputTokens != 100 || res.Usage.OutputTokens != 20) {
			rt.Fatalf("usage %+v", res.Usage)
		}
	})
}
