package agent_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/routing"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a fake adapter: it emits its deltas in order, calling hook
// (if set) before each one, then returns result or err.
type script struct {
	deltas []model.Delta
	hook   func(i int)
	result model.Result
	err    error
	// block makes Stream wait for ctx after the deltas.
	block bool
}

func (s script) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	for i, d := range s.deltas {
		if s.hook != nil {
			s.hook(i)
		}
		if err := ctx.Err(); err != nil {
			return model.Result{}, err
		}
		if err := emit(d); err != nil {
			return model.Result{}, err
		}
	}
	if s.block {
		<-ctx.Done()
		return s.result, ctx.Err()
	}
	return s.result, s.err
}

// seq plays one script per call.
type seq struct {
	calls   atomic.Int64
	scripts []script
}

func (q *seq) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	i := int(q.calls.Add(1)) - 1
	return q.scripts[min(i, len(q.scripts)-1)].Stream(ctx, req, emit)
}

// blockingTool runs until its context is done.
type blockingTool struct {
	started chan struct{}
	ran     atomic.Int64
}

func (b *blockingTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (b *blockingTool) Run(ctx context.Context, env tool.Env, in json.RawMessage) (tool.Result, error) {
	b.ran.Add(1)
	close(b.started)
	<-ctx.Done()
	return tool.Result{}, ctx.Err()
}

type rig struct {
	t     *testing.T
	st    *store.Store
	bus   *bus.Bus
	rec   *servertest.Recorder
	loop  *agent.Loop
	em    *bus.Emitter
	root  *os.Root
	tools *tool.Registry
	sid   string
	// ending is passed as each turn's Turn.Ending.
	ending func(store.TurnStatus) string
}

func newRig(t *testing.T, adapter model.Adapter) *rig {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), store.Options{Path: filepath.Join(dir, "t.db")})
	servertest.Must(t, err)
	rec := servertest.NewRecorder()
	b := bus.New(st, bus.Options{Live: rec})
	models := model.NewRegistry()
	models.Register("fake", adapter)
	models.Unavailable("gone", "no key set")
	tools := tool.NewRegistry(tool.Builtins()...)
	r := &rig{t: t, st: st, bus: b, rec: rec, tools: tools, sid: "sess_test"}
	r.loop = agent.New(agent.Config{Models: models, Tools: tools, Prices: price.NewTable(nil, nil),
		History: agent.HistoryFunc(func(ctx context.Context, id string) ([]message.Message, error) {
			msgs, _, err := st.Messages(ctx, id, "", 0)
			return msgs, err
		})})
	servertest.Must(t, st.Apply(context.Background(), store.CreateSession{Session: store.Session{ID: r.sid, WorkspacePath: dir, ActiveModel: "fake:m", CreatedAt: time.Now()}}))
	r.em, err = b.Emitter(context.Background(), r.sid)
	servertest.Must(t, err)
	r.root, err = os.OpenRoot(dir)
	servertest.Must(t, err)
	t.Cleanup(func() {
		r.root.Close()
		servertest.Must(t, b.Close(context.Background()))
		servertest.Must(t, st.Close())
	})
	return r
}

// run starts a turn on model and returns its outcome and its events
// (both families, as delivered live).
func (r *rig) run(ctx context.Context, modelID string) (agent.Outcome, []*event.Event) {
	r.t.Helper()
	turn := event.NewID("turn_")
	user := message.Message{ID: event.NewID("msg_"), SessionID: r.sid, TurnID: turn, Role: message.RoleUser,
		Content: []message.Block{message.Text("hi")}, Status: message.StatusComplete}
	_, err := r.em.EmitWait(ctx, bus.Spec{Type: event.TurnStarted, TurnID: turn, Actor: "user", Payload: map[string]any{"user_message": user},
		Ops: []store.Op{store.PutMessage{Message: user}, store.PutTurn{Turn: store.Turn{ID: turn, SessionID: r.sid, Status: store.TurnInFlight}}}})
	servertest.Must(r.t, err)
	out := r.loop.Run(ctx, agent.Turn{ID: turn, SessionID: r.sid, SessionModel: modelID, Root: r.root, Emitter: r.em,
		Router: routing.NewStatic(), UserText: "hi", Ending: r.ending})
	servertest.Must(r.t, r.em.Barrier(context.Background()))
	var evs []*event.Event
	for _, e := range r.rec.Events(r.sid) {
		if e.TurnID == turn {
			evs = append(evs, e)
		}
	}
	return out, evs
}

func types(evs []*event.Event) []event.Type { return servertest.Types(evs) }

func find(evs []*event.Event, t event.Type) []*event.Event {
	var out []*event.Event
	for _, e := range evs {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

func payload(t *testing.T, e *event.Event) map[string]any {
	t.Helper()
	var m map[string]any
	servertest.Must(t, json.Unmarshal(e.Payload, &m))
	return m
}

func textDeltas(n int) []model.Delta {
	out := make([]model.Delta, n)
	for i := range out {
		out[i] = model.Delta{Kind: model.KindText, Index: 0, Text: "word "}
	}
	return out
}

// TestSpec11_1_7_CancelDuringLLMStreaming: cancel mid-text gives
// message.complete(cancelled, partial) → llm.call_failed(cancelled) →
// turn.cancelled, and no tool.failed.
func TestSpec11_1_7_CancelDuringLLMStreaming(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	adapter := script{deltas: textDeltas(10), block: true,
		hook: func(i int) {
			if i == 4 {
				cancel(&agent.CancelCause{Reason: "user_cancel"})
			}
		}}
	r := newRig(t, adapter)
	out, evs := r.run(ctx, "fake:m")
	if out.Status != store.TurnCancelled || out.Reason != "user_cancel" {
		t.Fatalf("outcome %+v", out)
	}
	want := []event.Type{event.TurnStarted, event.RouteDecided, event.LLMCallStarted, event.MessageStart,
		event.TextDelta, event.TextDelta, event.TextDelta, event.TextDelta,
		event.MessageComplete, event.LLMCallFailed, event.TurnCancelled}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("sequence\n got %v\nwant %v", got, want)
	}
	mc := payload(t, find(evs, event.MessageComplete)[0])
	if mc["stop_reason"] != "cancelled" {
		t.Errorf("stop_reason %v", mc["stop_reason"])
	}
	fc := mc["final_content"].([]any)
	if len(fc) != 1 || fc[0].(map[string]any)["text"] != "word word word word " {
		t.Errorf("partial content %v", fc)
	}
	if p := payload(t, find(evs, event.LLMCallFailed)[0]); p["error_class"] != "cancelled" {
		t.Errorf("llm.call_failed %v", p)
	}
	if p := payload(t, find(evs, event.TurnCancelled)[0]); p["reason"] != "user_cancel" || p["phase"] != "llm" {
		t.Errorf("turn.cancelled %v", p)
	}
	msgs, _, _ := r.st.Messages(context.Background(), r.sid, "", 0)
	if last := msgs[len(msgs)-1]; last.Status != message.StatusCancelled || last.PlainText() != "word word word word " {
		t.Errorf("persisted partial message %+v", last)
	}
}

// TestCancelMidToolInput closes the open tool block with tool.use_end
// before message.complete.
func TestCancelMidToolInput(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	adapter := script{block: true, deltas: []model.Delta{
		{Kind: model.KindToolUseStart, Index: 0, ToolUseID: "tu_1", ToolName: "block"},
		{Kind: model.KindToolInput, Index: 0, Text: `{"a": `},
	}, hook: func(i int) {
		if i == 1 {
			defer cancel(&agent.CancelCause{Reason: "user_cancel"})
		}
	}}
	r := newRig(t, adapter)
	_, evs := r.run(ctx, "fake:m")
	got := types(evs)
	i := slices.Index(got, event.ToolUseEnd)
	if i < 0 || got[i+1] != event.MessageComplete || got[i+2] != event.LLMCallFailed || got[i+3] != event.TurnCancelled {
		t.Fatalf("sequence %v", got)
	}
	if p := payload(t, evs[i]); p["tool_use_id"] != "tu_1" || len(p["final_input"].(map[string]any)) != 0 {
		t.Errorf("tool.use_end %v", p)
	}
	if len(find(evs, event.ToolFailed)) != 0 || len(find(evs, event.ToolCalled)) != 0 {
		t.Error("a tool event in an LLM-phase cancel")
	}
}

func toolCall(id string) []model.Delta {
	return []model.Delta{
		{Kind: model.KindToolUseStart, Index: 0, ToolUseID: id, ToolName: "block"},
		{Kind: model.KindToolInput, Index: 0, Text: `{}`},
		{Kind: model.KindBlockStop, Index: 0},
	}
}

// TestSpec11_1_8_CancelDuringToolDispatch: the model call completed, a
// tool runs; cancel gives tool.failed(cancelled) then turn.cancelled, no
// llm.call_failed and no second message.complete.
func TestSpec11_1_8_CancelDuringToolDispatch(t *testing.T) {
	blk := &blockingTool{started: make(chan struct{})}
	r := newRig(t, script{deltas: toolCall("tu_1"), result: model.Result{StopReason: model.StopToolUse}})
	r.tools.Register(blk)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-blk.started
		cancel(&agent.CancelCause{Reason: "user_cancel"})
	}()
	out, evs := r.run(ctx, "fake:m")
	if out.Status != store.TurnCancelled {
		t.Fatalf("outcome %+v", out)
	}
	got := types(evs)
	tail := got[slices.Index(got, event.LLMCallCompleted):]
	want := []event.Type{event.LLMCallCompleted, event.ToolCalled, event.ToolFailed, event.TurnCancelled}
	if !slices.Equal(tail, want) {
		t.Fatalf("after the call: %v, want %v", tail, want)
	}
	if len(find(evs, event.MessageComplete)) != 1 || len(find(evs, event.LLMCallFailed)) != 0 {
		t.Error("message.complete retransmitted or llm.call_failed emitted")
	}
	p := payload(t, find(evs, event.ToolFailed)[0])
	if p["error_class"] != "cancelled" || p["started"] != true {
		t.Errorf("tool.failed %v", p)
	}
	mid := payload(t, find(evs, event.LLMCallCompleted)[0])["message_id"].(string)
	row, err := r.st.ToolCall(context.Background(), r.sid, mid, "tu_1")
	if err != nil || row.Status != store.ToolCancelled {
		t.Errorf("tool call row %+v %v", row, err)
	}
	if p := payload(t, find(evs, event.TurnCancelled)[0]); p["phase"] != "tools" {
		t.Errorf("phase %v", p["phase"])
	}
}

// TestSpec11_1_8b_CancelAtSeam: the cancel lands after llm.call_completed
// but before any tool started: every pending tool fails with cancelled
// and none runs.
func TestSpec11_1_8b_CancelAtSeam(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	deltas := append(toolCall("tu_1"), []model.Delta{
		{Kind: model.KindToolUseStart, Index: 1, ToolUseID: "tu_2", ToolName: "block"},
		{Kind: model.KindBlockStop, Index: 1},
	}...)
	blk := &blockingTool{started: make(chan struct{})}
	r := newRig(t, script{deltas: deltas, result: model.Result{StopReason: model.StopToolUse}})
	r.tools.Register(blk)
	// The adapter finishes normally, then the cancel arrives.
	r2 := &cancelAfter{inner: script{deltas: deltas, result: model.Result{StopReason: model.StopToolUse}}, cancel: cancel}
	r.loop = agentWith(r, r2)
	_, evs := r.run(ctx, "fake:m")
	got := types(evs)
	tail := got[slices.Index(got, event.LLMCallCompleted):]
	want := []event.Type{event.LLMCallCompleted, event.ToolFailed, event.ToolFailed, event.TurnCancelled}
	if !slices.Equal(tail, want) {
		t.Fatalf("after the call: %v, want %v", tail, want)
	}
	for _, e := range find(evs, event.ToolFailed) {
		if p := payload(t, e); p["error_class"] != "cancelled" || p["started"] != false {
			t.Errorf("tool.failed %v", p)
		}
	}
	if blk.ran.Load() != 0 {
		t.Error("a tool ran after a seam cancel")
	}
	if p := payload(t, find(evs, event.TurnCancelled)[0]); p["phase"] != "seam" {
		t.Errorf("phase %v", p["phase"])
	}
	// The conversation stays valid: every tool_use has a result.
	msgs, _, _ := r.st.Messages(context.Background(), r.sid, "", 0)
	last := msgs[len(msgs)-1]
	if last.Role != message.RoleTool || len(last.Content) != 2 || !last.Content[0].IsError {
		t.Errorf("tool results message %+v", last)
	}
}

type cancelAfter struct {
	inner  model.Adapter
	cancel context.CancelCauseFunc
}

func (c *cancelAfter) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	res, err := c.inner.Stream(ctx, req, emit)
	c.cancel(&agent.CancelCause{Reason: "user_cancel"})
	return res, err
}

func agentWith(r *rig, a model.Adapter) *agent.Loop {
	models := model.NewRegistry()
	models.Register("fake", a)
	return agent.New(agent.Config{Models: models, Tools: r.tools, Prices: price.NewTable(nil, nil),
		History: agent.HistoryFunc(func(ctx context.Context, id string) ([]message.Message, error) {
			msgs, _, err := r.st.Messages(ctx, id, "", 0)
			return msgs, err
		})})
}

// TestModelErrorMidStream: an adapter error ends the call with
// message.complete(error) and llm.call_failed with its class, then
// turn.completed(failed) (spec §9.1).
func TestModelErrorMidStream(t *testing.T) {
	r := newRig(t, script{deltas: textDeltas(3), err: &model.Error{Class: model.ClassOverloaded, Message: "provider overloaded; retry later"}})
	out, evs := r.run(context.Background(), "fake:m")
	if out.Status != store.TurnFailed || out.Reason != model.ClassOverloaded {
		t.Fatalf("outcome %+v", out)
	}
	got := types(evs)
	if !slices.Equal(got[len(got)-3:], []event.Type{event.MessageComplete, event.LLMCallFailed, event.TurnCompleted}) {
		t.Fatalf("sequence %v", got)
	}
	if p := payload(t, find(evs, event.LLMCallFailed)[0]); p["error_class"] != "overloaded" || p["message"] != "provider overloaded; retry later" {
		t.Errorf("llm.call_failed %v", p)
	}
	if p := payload(t, find(evs, event.TurnCompleted)[0]); p["outcome"] != "failed" {
		t.Errorf("turn.completed %v", p)
	}
}

// TestUnavailableModelFailsAtRouting: a model that cannot be used fails
// the turn with a clear llm.call_failed right after route.decided.
func TestUnavailableModelFailsAtRouting(t *testing.T) {
	r := newRig(t, script{})
	out, evs := r.run(context.Background(), "gone:model")
	want := []event.Type{event.TurnStarted, event.RouteDecided, event.LLMCallFailed, event.TurnCompleted}
	if got := types(evs); !slices.Equal(got, want) || out.Status != store.TurnFailed {
		t.Fatalf("sequence %v outcome %+v", got, out)
	}
	p := payload(t, find(evs, event.LLMCallFailed)[0])
	if p["error_class"] != model.ClassUnavailable || p["message"] == "" {
		t.Errorf("llm.call_failed %v", p)
	}
}

// TestToolLoopAndErrors: tool errors are fed back and the loop goes on;
// a malformed tool input fails the tool with invalid_input; an unknown
// tool fails with not_found.
func TestToolLoopAndErrors(t *testing.T) {
	q := &seq{scripts: []script{
		{deltas: []model.Delta{
			{Kind: model.KindToolUseStart, Index: 0, ToolUseID: "tu_a", ToolName: "read_file"},
			{Kind: model.KindToolInput, Index: 0, Text: `{"path": "missing.txt"}`},
			{Kind: model.KindBlockStop, Index: 0},
			{Kind: model.KindToolUseStart, Index: 1, ToolUseID: "tu_b", ToolName: "list_dir"},
			{Kind: model.KindToolInput, Index: 1, Text: `{"path": `},
			{Kind: model.KindBlockStop, Index: 1},
			{Kind: model.KindToolUseStart, Index: 2, ToolUseID: "tu_c", ToolName: "nope"},
			{Kind: model.KindBlockStop, Index: 2},
		}, result: model.Result{StopReason: model.StopToolUse}},
		{deltas: []model.Delta{{Kind: model.KindText, Text: "done"}}, result: model.Result{StopReason: model.StopEndTurn}},
	}}
	r := newRig(t, q)
	out, evs := r.run(context.Background(), "fake:m")
	if out.Status != store.TurnCompleted || out.FinalText != "done" {
		t.Fatalf("outcome %+v", out)
	}
	classes := map[string]any{}
	for _, e := range find(evs, event.ToolFailed) {
		p := payload(t, e)
		classes[p["tool_use_id"].(string)] = p["error_class"]
	}
	want := map[string]any{"tu_a": "not_found", "tu_b": "invalid_input", "tu_c": "not_found"}
	for k, v := range want {
		if classes[k] != v {
			t.Errorf("%s: class %v, want %v", k, classes[k], v)
		}
	}
	if len(find(evs, event.LLMCallStarted)) != 2 {
		t.Error("the loop did not call the model again after tool errors")
	}
}

// TestHistoryRepairAfterCancel: the next turn's request carries no
// tool_use without a result.
func TestHistoryRepairAfterCancel(t *testing.T) {
	var seen []message.Message
	ctx, cancel := context.WithCancelCause(context.Background())
	first := script{block: true, deltas: []model.Delta{
		{Kind: model.KindText, Index: 0, Text: "partial"},
		{Kind: model.KindToolUseStart, Index: 1, ToolUseID: "tu_x", ToolName: "block"},
	}, hook: func(i int) {
		if i == 1 {
			defer cancel(&agent.CancelCause{Reason: "user_cancel"})
		}
	}}
	rec := &recordingAdapter{inner: first, seen: &seen}
	r := newRig(t, rec)
	r.run(ctx, "fake:m")
	rec.inner = script{deltas: []model.Delta{{Kind: model.KindText, Text: "ok"}}, result: model.Result{StopReason: model.StopEndTurn}}
	r.run(context.Background(), "fake:m")
	for _, m := range seen {
		for _, b := range m.Content {
			if b.Type == message.BlockToolUse {
				t.Fatalf("unanswered tool_use sent to the model: %+v", m)
			}
		}
	}
	if len(seen) != 3 || seen[1].PlainText() != "partial" {
		t.Fatalf("history sent: %+v", seen)
	}
}

type recordingAdapter struct {
	inner model.Adapter
	seen  *[]message.Message
}

func (r *recordingAdapter) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	*r.seen = req.Messages
	return r.inner.Stream(ctx, req, emit)
}

// sleepTool sleeps for its input's ms and records concurrency.
type sleepTool struct {
	cur, peak atomic.Int64
}

func (s *sleepTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "nap", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (s *sleepTool) Run(ctx context.Context, env tool.Env, in json.RawMessage) (tool.Result, error) {
	n := s.cur.Add(1)
	defer s.cur.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	var v struct{ MS int }
	json.Unmarshal(in, &v)
	select {
	case <-time.After(time.Duration(v.MS) * time.Millisecond):
		return tool.Result{Content: string(in)}, nil
	case <-ctx.Done():
		return tool.Result{}, ctx.Err()
	}
}

// TestParallelToolsKeepTheModelsOrder: six calls run at most
// ToolConcurrency at a time; results go back in the model's order even
// though they finish in another.
func TestParallelToolsKeepTheModelsOrder(t *testing.T) {
	var deltas []model.Delta
	durations := []int{120, 10, 80, 5, 60, 1}
	for i, ms := range durations {
		id := "tu_" + string(rune('a'+i))
		deltas = append(deltas,
			model.Delta{Kind: model.KindToolUseStart, Index: i, ToolUseID: id, ToolName: "nap"},
			model.Delta{Kind: model.KindToolInput, Index: i, Text: `{"MS":` + strconv.Itoa(ms) + `}`},
			model.Delta{Kind: model.KindBlockStop, Index: i})
	}
	q := &seq{scripts: []script{
		{deltas: deltas, result: model.Result{StopReason: model.StopToolUse}},
		{deltas: []model.Delta{{Kind: model.KindText, Text: "ok"}}, result: model.Result{StopReason: model.StopEndTurn}},
	}}
	r := newRig(t, q)
	nap := &sleepTool{}
	r.tools.Register(nap)
	out, evs := r.run(context.Background(), "fake:m")
	if out.Status != store.TurnCompleted {
		t.Fatalf("outcome %+v", out)
	}
	if p := nap.peak.Load(); p < 2 || p > int64(agent.DefaultToolConcurrency) {
		t.Errorf("peak concurrency %d", p)
	}
	var finished []string
	for _, e := range find(evs, event.ToolCompleted) {
		finished = append(finished, payload(t, e)["tool_use_id"].(string))
	}
	if len(finished) != len(durations) || finished[0] == "tu_a" {
		t.Errorf("completion order %v: the 120 ms call finished first", finished)
	}
	msgs, _, _ := r.st.Messages(context.Background(), r.sid, "", 0)
	var results message.Message
	for _, m := range msgs {
		if m.Role == message.RoleTool {
			results = m
		}
	}
	for i, b := range results.Content {
		if want := "tu_" + string(rune('a'+i)); b.ToolUseID != want || b.Content != `{"MS":`+strconv.Itoa(durations[i])+`}` {
			t.Fatalf("result %d: %+v", i, b)
		}
	}
}

// TestUnencodableEventEndsTheTurn: an event whose payload cannot be
// encoded (here a NaN cost from a broken price) aborts the turn, which
// still ends with turn.completed(failed, internal_error) and a stored
// failed turn row: nothing is left in flight.
func TestUnencodableEventEndsTheTurn(t *testing.T) {
	r := newRig(t, script{deltas: textDeltas(3)})
	r.loop = agent.New(agent.Config{Models: func() *model.Registry {
		m := model.NewRegistry()
		m.Register("fake", script{deltas: textDeltas(3)})
		return m
	}(), Tools: r.tools, Prices: price.NewTable(map[string]price.Price{"fake:m": {Input: math.NaN()}}, nil),
		History: agent.HistoryFunc(func(ctx context.Context, id string) ([]message.Message, error) { return nil, nil })})
	out, evs := r.run(context.Background(), "fake:m")
	if out.Status != store.TurnFailed || out.Reason != agent.ClassInternal {
		t.Fatalf("outcome %+v", out)
	}
	ends := find(evs, event.TurnCompleted)
	if len(ends) != 1 || evs[len(evs)-1] != ends[0] {
		t.Fatalf("want one turn.completed, last; got %v", types(evs))
	}
	if p := payload(t, ends[0]); p["outcome"] != "failed" || p["error_class"] != agent.ClassInternal {
		t.Fatalf("turn.completed %v", p)
	}
	row, err := r.st.Turn(context.Background(), ends[0].TurnID)
	if err != nil || row.Status != store.TurnFailed {
		t.Fatalf("stored turn %+v %v", row, err)
	}
}
