package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"
)

// longStream is the SSE body of a long streamed answer in the shape of
// the recorded streams in testdata (one event per line pair, a ping now
// and then): a thinking block of thinking deltas and a signature, a text
// block of text deltas, a tool_use block of input_json_delta fragments,
// then message_delta with the usage and stop reason. deltas is the
// number of content_block_delta events it holds.
func longStream(thinkingDeltas, textDeltas, inputDeltas int) (script string, deltas int) {
	words := strings.Fields("the stream of a long answer arrives in small pieces, a few words at a time, " +
		"and every piece is one content_block_delta event with its index and its text; " +
		"a reader sees them as they come, so each must cost little to decode.")
	var b strings.Builder
	ev := func(typ string, data any) {
		raw, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, raw)
		if b.Len()%7 == 0 {
			b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
		}
	}
	piece := func(i int) string {
		n := 1 + i%4
		var s strings.Builder
		for k := range n {
			s.WriteString(" ")
			s.WriteString(words[(i*3+k)%len(words)])
		}
		return s.String()
	}
	type obj = map[string]any
	// delta writes a content_block_delta with its fields in the
	// provider's order (maps would sort them).
	delta := func(index int, typ, field, text string) {
		q, _ := json.Marshal(text)
		ev("content_block_delta", json.RawMessage(fmt.Sprintf(
			`{"type":"content_block_delta","index":%d,"delta":{"type":%q,%q:%s}}`, index, typ, field, q)))
		deltas++
	}
	ev("message_start", obj{"type": "message_start", "message": obj{
		"id": "msg_01LongStreamBench0000000", "type": "message", "role": "assistant", "content": []any{},
		"model": "claude-sonnet-4-6", "stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": 2731, "output_tokens": 3, "cache_read_input_tokens": 1024, "cache_creation_input_tokens": 0}}})
	block := 0
	if thinkingDeltas > 0 {
		ev("content_block_start", obj{"type": "content_block_start", "index": block,
			"content_block": obj{"type": "thinking", "thinking": "", "signature": ""}})
		for i := range thinkingDeltas {
			delta(block, "thinking_delta", "thinking", piece(i))
		}
		delta(block, "signature_delta", "signature", "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds")
		ev("content_block_stop", obj{"type": "content_block_stop", "index": block})
		block++
	}
	ev("content_block_start", obj{"type": "content_block_start", "index": block,
		"content_block": obj{"type": "text", "text": ""}})
	for i := range textDeltas {
		delta(block, "text_delta", "text", piece(i))
	}
	ev("content_block_stop", obj{"type": "content_block_stop", "index": block})
	block++
	if inputDeltas > 0 {
		ev("content_block_start", obj{"type": "content_block_start", "index": block,
			"content_block": obj{"type": "tool_use", "id": "toolu_01LongStreamBench000000", "name": "write_file", "input": obj{}}})
		input, _ := json.Marshal(obj{"path": "notes/answer.md", "content": strings.Repeat("a line of the answer\n", inputDeltas)})
		step := max(1, len(input)/inputDeltas)
		for i := 0; i < len(input); i += step {
			delta(block, "input_json_delta", "partial_json", string(input[i:min(i+step, len(input))]))
		}
		ev("content_block_stop", obj{"type": "content_block_stop", "index": block})
	}
	stop := "end_turn"
	if inputDeltas > 0 {
		stop = "tool_use"
	}
	ev("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stop, "stop_sequence": nil},
		"usage": obj{"output_tokens": deltas * 3}})
	ev("message_stop", obj{"type": "message_stop"})
	return b.String(), deltas
}
