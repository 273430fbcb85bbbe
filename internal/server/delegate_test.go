package server_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// delegateCmd is a builtin:demo prompt that calls delegate with task.
func delegateCmd(task string) string {
	b, _ := json.Marshal(map[string]string{"task": task})
	return "/tool delegate " + string(b)
}

func find(evs []*protocol.EventEnvelope, typ event.Type) []*protocol.EventEnvelope {
	var out []*protocol.EventEnvelope
	for _, e := range evs {
		if e.Type == string(typ) {
			out = append(out, e)
		}
	}
	return out
}

// TestDelegateRunsAWorker: the planner's stream shows tool.called,
// delegate.started, delegate.completed and tool.completed with the
// worker's answer; the worker is a session of its own (parent set), its
// events stay off the planner's default stream, and a direct attach to it
// behaves like any session.
func TestDelegateRunsAWorker(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := attach(t, h, sid)
	turn := h.Submit(sid, delegateCmd("/echo the worker was here"))
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	got := types(evs)
	i := slices.Index(got, "tool.called")
	if i < 0 || !slices.Equal(got[i:i+4], []string{"tool.called", "delegate.started", "delegate.completed", "tool.completed"}) {
		t.Fatalf("planner sequence %v", got)
	}
	started := payloadOf(t, evs[i+1])
	wid, _ := started["worker_session_id"].(string)
	if wid == "" || started["task"] != "/echo the worker was here" {
		t.Fatalf("delegate.started %v", started)
	}
	if p := payloadOf(t, evs[i+2]); p["success"] != true || p["worker_session_id"] != wid || p["summary"] != "the worker was here" {
		t.Fatalf("delegate.completed %v", p)
	}
	if p := payloadOf(t, evs[i+3]); p["result"] != "the worker was here" {
		t.Fatalf("tool.completed %v", p)
	}
	for _, e := range evs {
		if e.SessionID != sid {
			t.Fatalf("worker event %s on the planner's default stream", e.Type)
		}
	}
	h.WaitTurn(sid)
	var sum struct {
		Session struct {
			ParentSessionID *string `json:"parent_session_id"`
			WorkspacePath   string  `json:"workspace_path"`
			TurnCount       int     `json:"turn_count"`
		} `json:"session"`
	}
	h.Do("GET", "/sessions/"+wid, nil, &sum)
	if sum.Session.ParentSessionID == nil || *sum.Session.ParentSessionID != sid || sum.Session.WorkspacePath != h.Workspace {
		t.Fatalf("worker summary %+v", sum.Session)
	}
	// A snapshot of the planner describes the worker (a metis extension),
	// so a client rebuilds its card without the delegate.* events.
	ps := streamtest.Attach(t, h.URL, sid)
	ps.Subscribe("preset:chat", nil, true)
	ps.Read(wait)
	psnap := ps.Read(wait)
	if psnap.Snap == nil || len(psnap.Snap.Workers) != 1 {
		t.Fatalf("planner snapshot %s", psnap.Raw)
	}
	if sw := psnap.Snap.Workers[0]; sw.SessionID != wid || sw.Task != "/echo the worker was here" || sw.Status != "completed" ||
		sw.Summary != "the worker was here" || sw.Model != "builtin:demo" {
		t.Fatalf("snapshot worker %+v", sw)
	}
	// Direct attach to the worker: a snapshot and then its stream.
	w := streamtest.Attach(t, h.URL, wid)
	w.Subscribe("preset:chat", nil, true)
	w.Read(wait)
	snap := w.Read(wait)
	if snap.Snap == nil || len(snap.Snap.Messages) != 2 || len(snap.Snap.Workers) != 0 {
		t.Fatalf("worker snapshot %s", snap.Raw)
	}
	// Replay of the worker from its start.
	w2 := streamtest.Attach(t, h.URL, wid)
	first, _ := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{wid}, Limit: 1})
	since := first[0].ID
	w2.Subscribe("preset:chat", &since, false)
	ack := w2.Read(wait)
	if ack.Ack == nil || ack.Ack.ReplayEventCount == 0 {
		t.Fatalf("worker replay ack %s", ack.Raw)
	}
	replayed := w2.Events(wait, streamtest.UntilType(event.TurnCompleted, ""))
	if replayed[0].Type != "turn.started" {
		t.Fatalf("worker replay %v", types(replayed))
	}
}

// TestSpec11_1_9_CancelDuringDelegation: cancelling the planner while its
// worker streams cancels the worker per §6.2 (its own stream shows the
// LLM-phase sequence), then the planner gets delegate.failed
// (cancelled_by_user), tool.failed (cancelled) and turn.cancelled.
func TestSpec11_1_9_CancelDuringDelegation(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = 2 * time.Millisecond })
	sid := h.CreateSession()
	c := attach(t, h, sid)
	turn := h.Submit(sid, delegateCmd("/long 2000"))
	pre := c.Events(wait, streamtest.UntilType(event.DelegateStarted, turn))
	wid := payloadOf(t, pre[len(pre)-1])["worker_session_id"].(string)
	w := streamtest.Attach(t, h.URL, wid)
	w.Subscribe("preset:chat", nil, false)
	w.Read(wait)
	w.Events(wait, streamtest.UntilType(event.TextDelta, ""))

	c.Send(map[string]any{"type": "cancel", "turn_id": turn, "reason": "user_cancel"})
	post := c.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	if got := types(post); !slices.Equal(got, []string{"delegate.failed", "tool.failed", "turn.cancelled"}) {
		t.Fatalf("planner after the cancel: %v", got)
	}
	if p := payloadOf(t, post[0]); p["failure_mode"] != "cancelled_by_user" || p["worker_session_id"] != wid {
		t.Fatalf("delegate.failed %v", p)
	}
	if p := payloadOf(t, post[1]); p["error_class"] != "cancelled" {
		t.Fatalf("tool.failed %v", p)
	}
	wevs := w.Events(wait, streamtest.UntilType(event.TurnCancelled, ""))
	wtail := types(wevs[len(wevs)-3:])
	if !slices.Equal(wtail, []string{"message.complete", "llm.call_failed", "turn.cancelled"}) {
		t.Fatalf("worker tail %v", wtail)
	}
	// The worker's turn.cancelled came before the planner's.
	var wc, pc string
	for _, e := range wevs {
		if e.Type == "turn.cancelled" {
			wc = e.ID
		}
	}
	pc = post[2].ID
	if !(wc < pc) {
		t.Fatalf("worker cancelled at %s, planner at %s", wc, pc)
	}
}

// TestNestedDelegationAndDepthLimit: a worker can delegate again; past
// the depth limit delegate fails with invalid_input.
func TestNestedDelegationAndDepthLimit(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := attach(t, h, sid)
	task := "/echo bottom"
	for range 2 {
		task = delegateCmd(task)
	}
	turn := h.Submit(sid, delegateCmd(task)) // three levels
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	if p := payloadOf(t, find(evs, event.ToolCompleted)[0]); p["tool_name"] != "delegate" {
		t.Fatalf("tool.completed %v", p)
	}
	h.WaitTurn(sid)
	ss, _ := h.Server.Store.Sessions(context.Background())
	if len(ss) != 4 {
		t.Fatalf("%d sessions, want planner + 3 workers", len(ss))
	}

	turn = h.Submit(sid, delegateCmd(delegateCmd(delegateCmd(delegateCmd("/echo too deep")))))
	c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	h.WaitTurn(sid)
	calls, _ := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: sessionIDs(h), Types: []event.Type{event.ToolFailed}})
	found := false
	for _, e := range calls {
		var p map[string]any
		json.Unmarshal(e.Payload, &p)
		if p["tool_name"] == "delegate" && p["error_class"] == "invalid_input" {
			found = true
		}
	}
	if !found {
		t.Fatal("no delegate failed with invalid_input past the depth limit")
	}
}

func sessionIDs(h *servertest.Harness) []string {
	ss, _ := h.Server.Store.Sessions(context.Background())
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// TestDelegateWorkerFailureAndCostRollUp: a worker whose model cannot be
// used fails with worker_error; a worker's cost rolls up into the
// planner's cost_so_far_usd.
func TestDelegateWorkerFailureAndCostRollUp(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "routing.yaml"), []byte("workers:\n  rules:\n    - name: broken\n      when: {keywords: [broken]}\n      model: anthropic:claude-haiku-4-5\n"), 0o600)
	priced := func(c *config.Config) { c.Prices = map[string]price.Price{"builtin:demo": {Input: 1000, Output: 1000}} }
	h := servertest.Start(t, home, priced)
	sid := h.CreateSession()
	c := attach(t, h, sid)
	turn := h.Submit(sid, delegateCmd("/echo this is broken"))
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	f := find(evs, event.DelegateFailed)
	if len(f) != 1 || payloadOf(t, f[0])["failure_mode"] != "worker_error" {
		t.Fatalf("delegate events %v", types(evs))
	}

	turn = h.Submit(sid, delegateCmd("/echo a fine task"))
	evs = c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	done := find(evs, event.DelegateCompleted)
	if len(done) != 1 {
		t.Fatalf("events %v", types(evs))
	}
	wid := payloadOf(t, done[0])["worker_session_id"].(string)
	h.WaitTurn(sid)
	ctx := context.Background()
	servertest.WaitFor(t, "the roll-up", func() bool {
		p, _ := h.Server.Store.Session(ctx, sid)
		w, _ := h.Server.Store.Session(ctx, wid)
		own := sumCost(t, h, sid)
		return w.CostUSD > 0 && math.Abs(p.CostUSD-(own+w.CostUSD+sumCostOfFailedWorkers(t, h, sid, wid))) < 1e-9
	})
}

func sumCost(t *testing.T, h *servertest.Harness, sid string) float64 {
	evs, _ := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.LLMCallCompleted, event.LLMCallFailed}})
	total := 0.0
	for _, e := range evs {
		var p struct {
			Usage struct {
				CostUSD float64 `json:"cost_usd"`
			} `json:"usage"`
		}
		json.Unmarshal(e.Payload, &p)
		total += p.Usage.CostUSD
	}
	return total
}

// sumCostOfFailedWorkers adds the costs of the planner's other workers.
func sumCostOfFailedWorkers(t *testing.T, h *servertest.Harness, planner, except string) float64 {
	total := 0.0
	ss, _ := h.Server.Store.Sessions(context.Background())
	for _, s := range ss {
		if s.ParentSessionID == planner && s.ID != except {
			total += sumCost(t, h, s.ID)
		}
	}
	return total
}

// TestDelegateModelWinsOverWorkerRules: a model named in the delegate
// call runs the worker's turn even when a workers rule would pick
// another.
func TestDelegateModelWinsOverWorkerRules(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "routing.yaml"), []byte("workers:\n  default: anthropic:claude-haiku-4-5\n"), 0o600)
	h := servertest.Start(t, home)
	sid := h.CreateSession()
	c := attach(t, h, sid)
	b, _ := json.Marshal(map[string]string{"task": "/echo chosen", "model": "builtin:demo"})
	turn := h.Submit(sid, "/tool delegate "+string(b))
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	if len(find(evs, event.DelegateCompleted)) != 1 {
		t.Fatalf("events %v", types(evs))
	}
	wid := payloadOf(t, find(evs, event.DelegateStarted)[0])["worker_session_id"].(string)
	routes, _ := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{wid}, Types: []event.Type{event.RouteDecided}})
	var p map[string]any
	json.Unmarshal(routes[0].Payload, &p)
	if p["model"] != "builtin:demo" || p["reason"] != "slash_command" {
		t.Fatalf("worker route %v", p)
	}
}
