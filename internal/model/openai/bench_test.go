package openai

import (
	"bytes"
	"context"
	"github.com/metis-agent/metis/internal/benchtest/cpu"
	"io"
	"net/http"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/metis-agent/metis/internal/model"
)

// BenchmarkStreamDecode feeds a long streamed answer (300 reasoning
// chunks, 4,000 content chunks, a tool call in 200 argument fragments)
// and reports time and allocations per chunk carrying a fragment, split
// into the parts of the work:
//
//   - adapter: the whole adapter over an httptest server (HTTP, the SDK's
//     SSE framing, decoding, translation, the idle guard);
//   - framing: the SDK's SSE decoder alone over the body's bytes;
//   - sdk-full-decode: the SDK's stream reader decoding every chunk into
//     its ChatCompletionChunk (what ChatCompletions.NewStreaming and the
//     adapter did before);
//   - decode: the SDK's stream reader with the adapter's decode (chunk);
//   - translate: the translator alone, on chunks decoded beforehand.
func BenchmarkStreamDecode(b *testing.B) {
	script, deltas := longStream(300, 4000, 200)
	body := []byte(script)
	b.Run("adapter", func(b *testing.B) {
		fs := newServer(b, func(w http.ResponseWriter, _ *http.Request) {
			startSSE(w)
			w.Write(body)
		})
		a := fs.adapter(b, nil)
		req := simpleReq()
		emit := func(model.Delta) error { return nil }
		cpu.PerDelta(b, deltas, func() {
			if _, err := a.Stream(context.Background(), req, emit); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("framing", func(b *testing.B) {
		cpu.PerDelta(b, deltas, func() {
			dec := ssestream.NewDecoder(sseResponse(body))
			for dec.Next() {
			}
			if err := dec.Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("sdk-full-decode", func(b *testing.B) {
		cpu.PerDelta(b, deltas, func() {
			s := ssestream.NewStream[sdk.ChatCompletionChunk](ssestream.NewDecoder(sseResponse(body)), nil)
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("decode", func(b *testing.B) {
		cpu.PerDelta(b, deltas, func() {
			s := ssestream.NewStream[chunk](ssestream.NewDecoder(sseResponse(body)), nil)
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("translate", func(b *testing.B) {
		var chunks []chunk
		s := ssestream.NewStream[chunk](ssestream.NewDecoder(sseResponse(body)), nil)
		for s.Next() {
			chunks = append(chunks, s.Current())
		}
		emit := func(model.Delta) error { return nil }
		cpu.PerDelta(b, deltas, func() {
			t := newTranslator(context.Background(), emit, quietLogger())
			for i := range chunks {
				if err := t.chunk(&chunks[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := t.finish(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// sseResponse is an event-stream response whose body is body.
func sseResponse(body []byte) *http.Response {
	return &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
}
