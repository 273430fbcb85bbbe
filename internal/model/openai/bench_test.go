package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"syscall"
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
		perDelta(b, deltas, func() {
			if _, err := a.Stream(context.Background(), req, emit); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("framing", func(b *testing.B) {
		perDelta(b, deltas, func() {
			dec := ssestream.NewDecoder(sseResponse(body))
			for dec.Next() {
			}
			if err := dec.Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("sdk-full-decode", func(b *testing.B) {
		perDelta(b, deltas, func() {
			s := ssestream.NewStream[sdk.ChatCompletionChunk](ssestream.NewDecoder(sseResponse(body)), nil)
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("decode", func(b *testing.B) {
		perDelta(b, deltas, func() {
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
		perDelta(b, deltas, func() {
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

// cpuTime is the CPU time the process has used (user and system), in
// nanoseconds: on a machine shared with other work it is steadier than
// wall time.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// perDelta runs one whole stream per iteration and reports ns/delta,
// cpu-ns/delta (process CPU time, all goroutines and the GC included),
// allocs/delta and B/delta besides the per-stream figures.
func perDelta(b *testing.B, deltas int, stream func()) {
	b.Helper()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	n := 0
	for b.Loop() {
		stream()
		n++
	}
	cpu = cpuTime() - cpu
	runtime.ReadMemStats(&after)
	total := float64(n * deltas)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/delta")
	b.ReportMetric(float64(cpu)/total, "cpu-ns/delta")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/delta")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/total, "B/delta")
}
