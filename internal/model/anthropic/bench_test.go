package anthropic

import (
	"bytes"
	"context"
	"github.com/metis-agent/metis/internal/benchtest/cpu"
	"io"
	"net/http"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/metis-agent/metis/internal/model"
)

// BenchmarkStreamDecode feeds a long streamed answer (300 thinking
// deltas and a signature, 4,000 text deltas, 200 tool input fragments;
// pings between) and reports time and allocations per
// content_block_delta, split into the parts of the work:
//
//   - adapter: the whole adapter over an httptest server (HTTP, the SDK's
//     SSE framing, decoding, translation, the idle guard);
//   - framing: the SDK's SSE decoder alone over the body's bytes;
//   - sdk-full-decode: framing plus the SDK's full decode of every event
//     (the union, then AsAny: what Messages.NewStreaming and the adapter
//     did before);
//   - decode: framing plus the adapter's decode (event);
//   - translate: the translator alone, on events decoded beforehand.
func BenchmarkStreamDecode(b *testing.B) {
	script, deltas := longStream(300, 4000, 200)
	body := []byte(script)
	b.Run("adapter", func(b *testing.B) {
		f := newFake(b, func(_ int, w http.ResponseWriter, _ *http.Request) {
			sseHeaders(w)
			w.Write(body)
		})
		a := newAdapter(b, f, nil)
		req := simpleRequest()
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
			s := ssestream.NewStream[sdk.MessageStreamEventUnion](ssestream.NewDecoder(sseResponse(body)), nil)
			for s.Next() {
				_ = s.Current().AsAny()
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("decode", func(b *testing.B) {
		cpu.PerDelta(b, deltas, func() {
			s := ssestream.NewStream[event](ssestream.NewDecoder(sseResponse(body)), nil)
			for s.Next() {
				_ = s.Current()
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("translate", func(b *testing.B) {
		var events []event
		s := ssestream.NewStream[event](ssestream.NewDecoder(sseResponse(body)), nil)
		for s.Next() {
			events = append(events, s.Current())
		}
		emit := func(model.Delta) error { return nil }
		cpu.PerDelta(b, deltas, func() {
			t := &translator{DeltaSink: model.DeltaSink{Ctx: context.Background(), Emit: emit}, log: quiet}
			for i := range events {
				if err := t.handle(&events[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// sseResponse is an event-stream response whose body is body.
func sseResponse(body []byte) *http.Response {
	return &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
}
