package openai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// longStream is the SSE body of a long streamed answer in the shape of
// the recorded chat.completion.chunk streams in testdata: reasoning
// deltas (reasoning_content, as vLLM and llama.cpp send it), content
// deltas, one tool call whose arguments arrive in fragments, the
// finish_reason chunk, the usage chunk and [DONE]. deltas is the number
// of chunks that carry a fragment.
func longStream(reasoningDeltas, textDeltas, argDeltas int) (script string, deltas int) {
	words := strings.Fields("the stream of a long answer arrives in small pieces, a few words at a time, " +
		"and every piece is one chat.completion.chunk with its choices and its delta; " +
		"a reader sees them as they come, so each must cost little to decode.")
	piece := func(i int) string {
		var s strings.Builder
		for k := range 1 + i%4 {
			s.WriteString(" ")
			s.WriteString(words[(i*3+k)%len(words)])
		}
		return s.String()
	}
	var b strings.Builder
	chunk := func(choice string, usage string) {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-LongStreamBench00000000000000","object":"chat.completion.chunk","created":1750000000,`+
			`"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_51e1070cf2","choices":[%s],"usage":%s,"obfuscation":"qK"}`+"\n\n",
			choice, usage)
	}
	delta := func(d string) {
		chunk(`{"index":0,"delta":`+d+`,"logprobs":null,"finish_reason":null}`, "null")
		deltas++
	}
	q := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	chunk(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`, "null")
	for i := range reasoningDeltas {
		delta(`{"reasoning_content":` + q(piece(i)) + `}`)
	}
	for i := range textDeltas {
		delta(`{"content":` + q(piece(i)) + `}`)
	}
	finish := "stop"
	if argDeltas > 0 {
		finish = "tool_calls"
		delta(`{"tool_calls":[{"index":0,"id":"call_LongStreamBench0000000","type":"function","function":{"name":"write_file","arguments":""}}]}`)
		args, _ := json.Marshal(map[string]string{"path": "notes/answer.md", "content": strings.Repeat("a line of the answer\n", argDeltas)})
		step := max(1, len(args)/argDeltas)
		for i := 0; i < len(args); i += step {
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":` + q(string(args[i:min(i+step, len(args))])) + `}}]}`)
		}
	}
	chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"`+finish+`"}`, "null")
	chunk("", fmt.Sprintf(`{"prompt_tokens":2731,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},`+
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`, deltas*3, 2731+deltas*3))
	b.WriteString("data: [DONE]\n\n")
	return b.String(), deltas
}
