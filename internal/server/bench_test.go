package server_test

import (
	"context"
	"testing"

	"github.com/metis-agent/metis/internal/servertest"
)

// BenchmarkTurnBuiltinDemo measures the agent loop's overhead per turn:
// a whole builtin:demo turn (route, two model calls with thinking, text
// and a tool call, list_dir really executed, every event persisted or
// streamed) with the demo's delays set to zero. Each turn runs on a
// fresh session so the figure does not grow with the conversation.
func BenchmarkTurnBuiltinDemo(b *testing.B) {
	h := servertest.Start(b, "")
	ctx := context.Background()
	events := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		sid := h.CreateSession()
		b.StartTimer()
		if _, err := h.Server.Sessions.Submit(ctx, sid, "what is in the workspace?"); err != nil {
			b.Fatal(err)
		}
		if err := h.Server.Sessions.Wait(ctx, sid); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		h.WaitTurn(sid)
		events += len(h.Live.Events(sid)) - 1 // less session.created
		b.StartTimer()
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/turn")
}
