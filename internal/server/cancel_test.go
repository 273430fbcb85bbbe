package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

const wait = 10 * time.Second

func attach(t *testing.T, h *servertest.Harness, sid string) *streamtest.Client {
	c := streamtest.Attach(t, h.URL, sid)
	c.Subscribe("preset:chat", nil, false)
	if f := c.Read(wait); f.Ack == nil {
		t.Fatalf("want subscribe_ack, got %s", f.Raw)
	}
	return c
}

func types(evs []*protocol.EventEnvelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func count(evs []*protocol.EventEnvelope, typ event.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == string(typ) {
			n++
		}
	}
	return n
}

func payloadOf(t *testing.T, e *protocol.EventEnvelope) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSpec11_1_8_CancelDuringToolDispatch: a shell command is running
// (the model call already completed); a cancel frame from one client
// gives every client tool.failed(cancelled) then turn.cancelled, with no
// llm.call_failed and no second message.complete; the tool call row is
// cancelled and the process is gone.
func TestSpec11_1_8_CancelDuringToolDispatch(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	tui, dash := attach(t, h, sid), attach(t, h, sid)
	turn := h.Submit(sid, `/tool shell {"command": "echo $$ > pid; exec sleep 300"}`)
	first := tui.Events(wait, streamtest.UntilType(event.ToolCalled, turn))
	servertest.WaitFor(t, "the command to start", func() bool {
		_, err := readFile(h.Workspace, "pid")
		return err == nil
	})
	tui.Send(map[string]any{"type": "cancel", "turn_id": turn, "reason": "user_cancel"})
	rest := tui.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	if got := types(rest); !slices.Equal(got, []string{"tool.failed", "turn.cancelled"}) {
		t.Fatalf("after tool.called: %v", got)
	}
	all := append(first, rest...)
	if count(all, event.LLMCallFailed) != 0 || count(all, event.MessageComplete) != 1 {
		t.Fatalf("llm.call_failed or a second message.complete in %v", types(all))
	}
	if p := payloadOf(t, rest[0]); p["error_class"] != "cancelled" || p["tool_name"] != "shell" {
		t.Errorf("tool.failed %v", p)
	}
	if p := payloadOf(t, rest[1]); p["reason"] != "user_cancel" {
		t.Errorf("turn.cancelled %v", p)
	}
	// The dashboard saw the same cancellation.
	dall := dash.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	if got := types(dall[len(dall)-2:]); !slices.Equal(got, []string{"tool.failed", "turn.cancelled"}) {
		t.Fatalf("dashboard tail %v", got)
	}
	if len(dall) != len(all) {
		t.Errorf("dashboard saw %d events, tui %d", len(dall), len(all))
	}
	h.WaitTurn(sid)
	calls, err := h.Server.Store.ToolCalls(context.Background(), turn)
	servertest.Must(t, err)
	if len(calls) != 1 || calls[0].Status != store.ToolCancelled {
		t.Fatalf("tool calls %+v", calls)
	}
	pid, _ := readFile(h.Workspace, "pid")
	if processAlive(pid) {
		t.Fatalf("shell process %s survived the cancel", pid)
	}
}

// TestSpec11_1_8b_CancelAtSeam: the cancel lands after llm.call_completed
// and before the tool starts: tool.failed(cancelled, not started), then
// turn.cancelled; the command never runs.
func TestSpec11_1_8b_CancelAtSeam(t *testing.T) {
	h := servertest.Start(t, "")
	atSeam := make(chan string, 1)
	h.Server.Loop.SetBeforeTools(func(ctx context.Context, turnID string) {
		atSeam <- turnID
		<-ctx.Done()
	})
	sid := h.CreateSession()
	c := attach(t, h, sid)
	turn := h.Submit(sid, `/tool shell {"command": "touch ran"}`)
	<-atSeam
	c.Send(map[string]any{"type": "cancel", "turn_id": turn})
	evs := c.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	got := types(evs)
	i := slices.Index(got, "llm.call_completed")
	if i < 0 || !slices.Equal(got[i:], []string{"llm.call_completed", "tool.failed", "turn.cancelled"}) {
		t.Fatalf("sequence %v", got)
	}
	if p := payloadOf(t, evs[i+1]); p["error_class"] != "cancelled" || p["started"] != false {
		t.Errorf("tool.failed %v", p)
	}
	if count(evs, event.ToolCalled) != 0 || count(evs, event.LLMCallFailed) != 0 {
		t.Errorf("tool.called or llm.call_failed in %v", got)
	}
	h.WaitTurn(sid)
	if _, err := readFile(h.Workspace, "ran"); err == nil {
		t.Fatal("the command ran after a seam cancel")
	}
}

// TestSpec11_1_10_IdempotentCancelOverHTTPAndStream: a cancel from the
// stream and one from HTTP on the same running tool give one
// cancellation and one redundant-cancel warning.
func TestSpec11_1_10_IdempotentCancelOverHTTPAndStream(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := streamtest.Attach(t, h.URL, sid)
	c.Subscribe("preset:full", nil, false)
	c.Read(wait)
	turn := h.Submit(sid, `/tool shell {"command": "exec sleep 300"}`)
	c.Events(wait, streamtest.UntilType(event.ToolCalled, turn))
	c.Send(map[string]any{"type": "cancel", "turn_id": turn})
	var res map[string]string
	h.Do("POST", "/sessions/"+sid+"/turns/"+turn+"/cancel", map[string]string{}, &res)
	evs := c.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	h.WaitTurn(sid)
	servertest.WaitFor(t, "the warning", func() bool {
		ws, _ := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.BusHandlerWarning}})
		return len(ws) == 1
	})
	if count(evs, event.TurnCancelled) != 1 || count(evs, event.ToolFailed) != 1 {
		t.Fatalf("events %v", types(evs))
	}
	if res["status"] != "already_cancelling" && res["status"] != "cancelling" {
		t.Fatalf("HTTP cancel status %q", res["status"])
	}
}
