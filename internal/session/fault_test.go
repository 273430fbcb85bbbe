package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/routing"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/tool"
)

// toolThenText is a fake model: a conversation that does not end with
// tool results gets two list_dir calls (stop tool_use), one that does
// gets a text answer. It records every request's messages.
type toolThenText struct {
	mu   sync.Mutex
	reqs [][]message.Message
	// block, if set, makes the first call of each turn hang until ctx is
	// done after sending its deltas (to cancel during the LLM phase).
}

func (f *toolThenText) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req.Messages)
	f.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	if last.Role == message.RoleTool {
		if err := emit(model.Delta{Kind: model.KindText, Text: "done"}); err != nil {
			return model.Result{}, err
		}
		return model.Result{StopReason: model.StopEndTurn}, nil
	}
	for i, name := range []string{"list_dir", "slow"} {
		for _, d := range []model.Delta{
			{Kind: model.KindToolUseStart, Index: i, ToolUseID: fmt.Sprintf("call_%d", i), ToolName: name},
			{Kind: model.KindToolInput, Index: i, Text: `{"path": "."}`},
			{Kind: model.KindBlockStop, Index: i},
		} {
			if err := emit(d); err != nil {
				return model.Result{}, err
			}
		}
	}
	return model.Result{StopReason: model.StopToolUse}, nil
}

// slowTool finishes after list_dir (so the tool results message rides
// on its tool.completed), or blocks until cancelled when gate is set.
type slowTool struct {
	gate    atomic.Bool
	started chan struct{}
}

func (s *slowTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (s *slowTool) Run(ctx context.Context, env tool.Env, in json.RawMessage) (tool.Result, error) {
	if s.gate.Load() {
		select {
		case s.started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}
	select {
	case <-time.After(20 * time.Millisecond):
		return tool.Result{Content: "slept"}, nil
	case <-ctx.Done():
		return tool.Result{}, ctx.Err()
	}
}

// liveRec records live deliveries and resyncs per session.
type liveRec struct {
	*servertest.Recorder
	mu      sync.Mutex
	resyncs map[string]int
}

func (l *liveRec) Resync(sessionID string) {
	l.mu.Lock()
	l.resyncs[sessionID]++
	l.mu.Unlock()
}

func (l *liveRec) resynced(sessionID string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resyncs[sessionID]
}

type faultRig struct {
	t     *testing.T
	st    *store.Store
	bus   *bus.Bus
	live  *liveRec
	m     *session.Manager
	model *toolThenText
	slow  *slowTool
	sid   string
}

// newFaultRig starts a session manager on its own store with one
// session; opts adjust the manager's configuration.
func newFaultRig(t *testing.T, opts ...func(*session.Config)) *faultRig {
	t.Helper()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(context.Background(), store.Options{Path: filepath.Join(dir, "t.db"), Logger: quiet})
	servertest.Must(t, err)
	live := &liveRec{Recorder: servertest.NewRecorder(), resyncs: map[string]int{}}
	b := bus.New(st, bus.Options{Live: live, Logger: quiet})
	f := &faultRig{t: t, st: st, bus: b, live: live, model: &toolThenText{}, slow: &slowTool{started: make(chan struct{}, 1)}}
	models := model.NewRegistry()
	models.Register("fake", f.model)
	tools := tool.NewRegistry(append(tool.Builtins(), f.slow)...)
	var m *session.Manager
	loop := agent.New(agent.Config{Models: models, Tools: tools, Prices: price.NewTable(nil, nil), Logger: quiet,
		History: agent.HistoryFunc(func(ctx context.Context, id string) ([]message.Message, error) { return m.Conversation(ctx, id) })})
	cfg := session.Config{Store: st, Bus: b, Loop: loop, Router: routing.NewStatic(), Models: models,
		DefaultModel: "fake:m", Logger: quiet}
	for _, o := range opts {
		o(&cfg)
	}
	m = session.New(cfg)
	f.m = m
	ws := filepath.Join(dir, "ws")
	servertest.Must(t, os.Mkdir(ws, 0o755))
	sum, err := m.Create(context.Background(), session.CreateRequest{WorkspacePath: ws})
	servertest.Must(t, err)
	f.sid = sum.ID
	t.Cleanup(func() {
		st.SetFault(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		servertest.Must(t, m.Shutdown(ctx))
		servertest.Must(t, b.Close(ctx))
		servertest.Must(t, st.Close())
	})
	return f
}

// wait waits for the session's turn to end; a turn that never ends is a
// hang and fails the test.
func (f *faultRig) wait() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.m.Wait(ctx, f.sid); err != nil {
		f.t.Fatalf("the turn never ended: %v", err)
	}
}

// checkEnded checks a turn after its end: one terminal event, the last
// of the turn, committed and delivered live; the stored row ended with
// the same status; the API says no turn is in flight.
func (f *faultRig) checkEnded(turn string) (store.Turn, *event.Event) {
	f.t.Helper()
	ctx := context.Background()
	evs, err := f.st.Events(ctx, store.EventQuery{SessionIDs: []string{f.sid}})
	servertest.Must(f.t, err)
	var mine []*event.Event
	for _, e := range evs {
		if e.TurnID == turn {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		f.t.Fatal("no stored event of the turn")
	}
	last := mine[len(mine)-1]
	if count(mine, event.TurnCompleted)+count(mine, event.TurnCancelled) != 1 ||
		(last.Type != event.TurnCompleted && last.Type != event.TurnCancelled) {
		f.t.Fatalf("stored events of the turn %v: want one terminal event, last", servertest.Types(mine))
	}
	delivered := false
	for _, e := range f.live.Events(f.sid) {
		delivered = delivered || e.ID == last.ID
	}
	if !delivered {
		f.t.Fatalf("the terminal event %s was not delivered live", last.Type)
	}
	row, err := f.st.Turn(ctx, turn)
	servertest.Must(f.t, err)
	want := map[event.Type]store.TurnStatus{event.TurnCompleted: store.TurnCompleted, event.TurnCancelled: store.TurnCancelled}[last.Type]
	var p struct {
		Outcome string `json:"outcome"`
	}
	servertest.Must(f.t, json.Unmarshal(last.Payload, &p))
	if p.Outcome == "failed" {
		want = store.TurnFailed
	}
	if row.Status != want {
		f.t.Fatalf("turn row %+v after %s %s", row, last.Type, last.Payload)
	}
	sum, err := f.m.Get(ctx, f.sid)
	servertest.Must(f.t, err)
	if sum.CurrentTurnID != nil {
		f.t.Fatalf("the API says turn %s is in flight; the store says %s", *sum.CurrentTurnID, row.Status)
	}
	for _, c := range f.calls(turn) {
		if c.Status == store.ToolPending || c.Status == store.ToolRunning {
			f.t.Fatalf("tool call row left %s: %+v", c.Status, c)
		}
	}
	return row, last
}

func (f *faultRig) calls(turn string) []store.ToolCall {
	cs, err := f.st.ToolCalls(context.Background(), turn)
	servertest.Must(f.t, err)
	return cs
}

// checkNextTurn runs another turn, which must complete, and checks the
// model was sent exactly the stored conversation: every message it got
// is stored, with the same role and text, and every stored message it
// did not get is one that history repair drops (nothing left once
// unanswered tool calls are removed).
func (f *faultRig) checkNextTurn() {
	f.t.Helper()
	ctx := context.Background()
	turn, err := f.m.Submit(ctx, f.sid, "next")
	servertest.Must(f.t, err)
	f.wait()
	row, _ := f.checkEnded(turn)
	if row.Status != store.TurnCompleted {
		f.t.Fatalf("the next turn ended %+v", row)
	}
	stored, err := f.m.Conversation(ctx, f.sid)
	servertest.Must(f.t, err)
	byID := map[string]message.Message{}
	for _, m := range stored {
		byID[m.ID] = m
	}
	// The next turn's first request: the one whose last message is the
	// user's "next".
	var req []message.Message
	f.model.mu.Lock()
	for _, r := range f.model.reqs {
		if l := r[len(r)-1]; l.Role == message.RoleUser && l.PlainText() == "next" {
			req = r
		}
	}
	f.model.mu.Unlock()
	if req == nil {
		f.t.Fatal("the next turn sent no request")
	}
	sent := map[string]bool{}
	for _, m := range req {
		s, ok := byID[m.ID]
		if !ok || s.Role != m.Role || s.PlainText() != m.PlainText() {
			f.t.Fatalf("sent message %s (%s %q) is not the stored one (%v)", m.ID, m.Role, m.PlainText(), ok)
		}
		sent[m.ID] = true
	}
	for i, m := range stored {
		if sent[m.ID] || m.TurnID == turn && m.Role != message.RoleUser {
			continue
		}
		// A tool call is answered by the tool message right after it.
		answered := map[string]bool{}
		if i+1 < len(stored) && stored[i+1].Role == message.RoleTool {
			for _, b := range stored[i+1].Content {
				answered[b.ToolUseID] = true
			}
		}
		for _, b := range m.Content {
			if b.Type == message.BlockToolUse && answered[b.ID] || b.Type == message.BlockText && b.Text != "" ||
				b.Type == message.BlockToolResult {
				f.t.Fatalf("stored message %s (%s) was not sent to the model", m.ID, m.Role)
			}
		}
	}
}

// faultPoints: a failure at every point of a turn. match picks the one
// transaction to lose (its batch and its retry alone both fail).
var faultPoints = []struct {
	name   string
	match  func(ops []store.Op) bool
	cancel bool // cancel the turn while its slow tool runs
}{
	{"turn.started", hasEvent(event.TurnStarted), false},
	{"route.decided", hasEvent(event.RouteDecided), false},
	{"llm.call_started", hasEvent(event.LLMCallStarted), false},
	{"llm.call_completed", hasEvent(event.LLMCallCompleted), false},
	{"tool.called", hasEvent(event.ToolCalled), false},
	{"tool.completed", hasEvent(event.ToolCompleted), false},
	{"tool results message", hasToolResults, false},
	{"turn.completed", hasEvent(event.TurnCompleted), false},
	{"tool.failed of the cancellation", hasEvent(event.ToolFailed), true},
	{"turn.cancelled", hasEvent(event.TurnCancelled), true},
}

func hasEvent(typ event.Type) func([]store.Op) bool {
	return func(ops []store.Op) bool { return store.HasEvent(ops, typ) }
}

func hasToolResults(ops []store.Op) bool {
	for _, op := range ops {
		if p, ok := op.(store.PutMessage); ok && p.Message.Role == message.RoleTool {
			return true
		}
	}
	return false
}

// TestStoreFailureAtEveryPointOfATurn: a commit that fails at any point
// of a turn never loses the turn's end. The turn ends with a committed,
// delivered terminal event (or, if turn.started was lost, the API and
// the store agree that it never started), live clients are told to
// resync, the API and the stored turn row agree, and the next turn works
// and is sent exactly the stored conversation.
func TestStoreFailureAtEveryPointOfATurn(t *testing.T) {
	for _, fp := range faultPoints {
		t.Run(fp.name, func(t *testing.T) {
			f := newFaultRig(t)
			ctx := context.Background()
			f.slow.gate.Store(fp.cancel)
			f.st.SetFault(store.FailMatching(2, fp.match))
			turn, err := f.m.Submit(ctx, f.sid, "go")
			if fp.name == "turn.started" {
				if !errors.Is(err, bus.ErrNotCommitted) {
					t.Fatalf("submit with turn.started lost: %q, %v", turn, err)
				}
				sum, _ := f.m.Get(ctx, f.sid)
				open, _ := f.st.OpenTurns(ctx)
				if sum.CurrentTurnID != nil || len(open) != 0 {
					t.Fatalf("API turn %v, stored open turns %+v", sum.CurrentTurnID, open)
				}
				f.st.SetFault(nil)
				f.checkNextTurn()
				return
			}
			servertest.Must(t, err)
			if fp.cancel {
				<-f.slow.started
				if r, err := f.m.Cancel(ctx, f.sid, turn, ""); err != nil || r != session.Cancelling {
					t.Fatalf("cancel: %v %v", r, err)
				}
			}
			f.wait()
			_, last := f.checkEnded(turn)
			if f.live.resynced(f.sid) == 0 {
				t.Error("live clients were not told to resync")
			}
			var p map[string]any
			servertest.Must(t, json.Unmarshal(last.Payload, &p))
			switch {
			case fp.cancel:
				if last.Type != event.TurnCancelled || p["reason"] != "user_cancel" {
					t.Errorf("a cancelled turn ended %s %v", last.Type, p)
				}
			case fp.name == "turn.completed":
				// The lost end is written again: the turn completed.
				if p["outcome"] != "completed" {
					t.Errorf("turn.completed retried as %v", p)
				}
			default:
				if last.Type != event.TurnCompleted || p["outcome"] != "failed" || p["error_class"] != agent.ClassStorage {
					t.Errorf("ended %s %v, want turn.completed(failed, storage_error)", last.Type, p)
				}
			}
			f.st.SetFault(nil)
			f.slow.gate.Store(false)
			f.checkNextTurn()
		})
	}
}

// TestTurnEndWaitsForTheStore: while the store cannot write a turn's
// end, the turn stays in flight for the API and in the store alike; once
// the store recovers, the end is written and both say it ended.
func TestTurnEndWaitsForTheStore(t *testing.T) {
	f := newFaultRig(t)
	ctx := context.Background()
	var full atomic.Bool
	full.Store(true)
	var refused atomic.Int64
	f.st.SetFault(func(ops []store.Op) error {
		if full.Load() && store.HasEvent(ops, event.TurnCompleted) {
			refused.Add(1)
			return store.ErrInjected
		}
		return nil
	})
	turn, err := f.m.Submit(ctx, f.sid, "go")
	servertest.Must(t, err)
	servertest.WaitFor(t, "the end refused a few times", func() bool { return refused.Load() >= 4 })
	sum, err := f.m.Get(ctx, f.sid)
	servertest.Must(t, err)
	row, err := f.st.Turn(ctx, turn)
	servertest.Must(t, err)
	if sum.CurrentTurnID == nil || *sum.CurrentTurnID != turn || row.Status != store.TurnInFlight {
		t.Fatalf("while the end cannot be stored: API turn %v, stored row %+v", sum.CurrentTurnID, row)
	}
	full.Store(false)
	f.wait()
	if row, _ := f.checkEnded(turn); row.Status != store.TurnCompleted {
		t.Fatalf("row %+v", row)
	}
	f.checkNextTurn()
}
