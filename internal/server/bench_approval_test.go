package server_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// BenchmarkApprovalRoundTrip measures the time from approval.requested
// to the tool starting (tool.called) when a client answers at once over
// loopback: the request's delivery to a WebSocket client, the client's
// POST, the answer under the manager's lock, approval.resolved and
// tool.called committed. The interval is taken from the two events'
// server timestamps; its median is reported as ms-to-start.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	h := servertest.Start(b, "", func(c *config.Config) { c.DefaultMode = permission.ModeDefault })
	sid := h.CreateSession()
	c, _, _ := streamtest.Subscribe(b, streamtest.WebSocket, h.URL, sid, 15*time.Second, protocol.PresetChat, nil, false)
	var samples []time.Duration
	b.ResetTimer()
	for b.Loop() {
		turn := h.Submit(sid, `/tool write_file {"path": "bench.txt", "content": "x"}`)
		evs := c.Events(15*time.Second, streamtest.UntilType(event.ApprovalRequested, turn))
		req := streamtest.PayloadOf[protocol.ApprovalRequestedPayload](b, evs[len(evs)-1])
		if st := h.Do("POST", "/sessions/"+sid+"/approvals/"+req.ApprovalID, protocol.ApprovalAnswer{Decision: "allow"}, nil); st != http.StatusOK {
			b.Fatalf("answer: %d", st)
		}
		evs = append(evs, c.Events(15*time.Second, streamtest.UntilType(event.TurnCompleted, turn))...)
		var asked, started time.Time
		for _, e := range evs {
			ts, _ := time.Parse(time.RFC3339Nano, e.TS)
			switch e.Type {
			case string(event.ApprovalRequested):
				asked = ts
			case string(event.ToolCalled):
				started = ts
			}
		}
		samples = append(samples, started.Sub(asked))
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "ms-to-start")
}
