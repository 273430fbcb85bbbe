//go:build linux

package server_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// liveText joins the data of a call's tool.output_delta events.
func liveText(t *testing.T, evs []*protocol.EventEnvelope, toolUseID string) string {
	var b strings.Builder
	for _, e := range find(evs, event.ToolOutputDelta) {
		if p := payloadOf(t, e); p["tool_use_id"] == toolUseID {
			b.WriteString(p["data"].(string))
		}
	}
	return b.String()
}

// TestShellOutputDeltasReplayWithinTheRing: a client following a
// session sees a shell call's live output as tool.output_delta events
// before its tool.completed; a client that reconnects with a cursor
// taken at the call's tool.called, over either transport, gets the same
// deltas again from the session's ring (streaming_gap false), in order,
// before the same tool.completed; a filter of the delta and the call's
// ends is enough (what `metis tool-output` subscribes with).
func TestShellOutputDeltasReplayWithinTheRing(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := attach(t, h, sid)
	evs := toolTurn(t, h, c, sid, "shell", map[string]any{"command": "for i in 1 2 3; do echo line $i; sleep 0.1; done; echo oops >&2; exit 2"})
	called := find(evs, event.ToolCalled)
	done := find(evs, event.ToolCompleted)
	if len(called) != 1 || len(done) != 1 {
		t.Fatalf("events %v", types(evs))
	}
	id := payloadOf(t, called[0])["tool_use_id"].(string)
	if got := liveText(t, evs, id); got != "line 1\nline 2\nline 3\noops\n" {
		t.Fatalf("live output %q", got)
	}
	got := types(evs)
	end := slices.Index(got, string(event.ToolCompleted))
	if slices.Contains(got[end:], string(event.ToolOutputDelta)) || slices.Index(got, string(event.ToolOutputDelta)) < slices.Index(got, string(event.ToolCalled)) {
		t.Fatalf("a delta outside its call: %v", got)
	}
	if p := payloadOf(t, done[0]); p["exit_code"] != float64(2) {
		t.Fatalf("exit_code %v", p["exit_code"])
	}
	var want []string
	for _, e := range evs {
		if e.Type == string(event.ToolOutputDelta) || e.Type == string(event.ToolCompleted) {
			want = append(want, e.ID)
		}
	}
	cursor := called[0].ID
	filter := protocol.Filter{EventTypes: []string{string(event.ToolOutputDelta), string(event.ToolCompleted), string(event.ToolFailed)}}
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		conn, ack, _ := streamtest.Subscribe(t, tr, h.URL, sid, wait, filter, &cursor, false)
		defer conn.Close()
		if ack.StreamingGap || ack.ReplayEventCount != len(want) {
			t.Fatalf("ack %+v, want %d replayed events and no gap", ack, len(want))
		}
		replay := streamtest.ReadEvents(t, conn, wait, ack.ReplayEventCount)
		if !slices.Equal(streamtest.IDs(replay), want) {
			t.Fatalf("replayed %v, want %v", streamtest.IDs(replay), want)
		}
		if liveText(t, replay, id) != "line 1\nline 2\nline 3\noops\n" {
			t.Fatalf("replayed output %q", liveText(t, replay, id))
		}
	})
}
