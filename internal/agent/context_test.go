package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

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
	"github.com/metis-agent/metis/protocol"
)

// windowModel is a fake model for long sessions: a turn call answers
// "answer" (or fails as turnErr says), a summary call answers summary
// (or fails with summaryErr, or blocks until cancelled when
// blockSummary). It records every request.
type windowModel struct {
	mu           sync.Mutex
	reqs         []model.Request
	turnErrs     []error // the errors of the first turn calls, in order
	partial      string  // text a failing turn call streams before its error
	summary      string
	summaryErr   error
	blockSummary chan struct{} // closed when a summary call starts to block
	usage        message.Usage
}

func (w *windowModel) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	w.mu.Lock()
	w.reqs = append(w.reqs, req)
	var turnErr error
	if req.Task == "" {
		turns := 0
		for _, r := range w.reqs {
			if r.Task == "" {
				turns++
			}
		}
		if turns <= len(w.turnErrs) {
			turnErr = w.turnErrs[turns-1]
		}
	}
	w.mu.Unlock()
	if req.Task == model.TaskSummary {
		switch {
		case w.blockSummary != nil:
			close(w.blockSummary)
			<-ctx.Done()
			return model.Result{}, ctx.Err()
		case w.summaryErr != nil:
			return model.Result{}, w.summaryErr
		}
		if err := emit(model.Delta{Kind: model.KindText, Text: w.summary}); err != nil {
			return model.Result{}, err
		}
		return model.Result{StopReason: model.StopEndTurn, Usage: message.Usage{InputTokens: 100, OutputTokens: 10}}, nil
	}
	if turnErr != nil {
		if w.partial != "" {
			if err := emit(model.Delta{Kind: model.KindText, Text: w.partial}); err != nil {
				return model.Result{}, err
			}
		}
		return model.Result{}, turnErr
	}
	if err := emit(model.Delta{Kind: model.KindText, Text: "answer"}); err != nil {
		return model.Result{}, err
	}
	u := w.usage
	if u == (message.Usage{}) {
		u = message.Usage{InputTokens: int64(model.EstimateTokens(req)), OutputTokens: 2}
	}
	return model.Result{StopReason: model.StopEndTurn, Usage: u}, nil
}

func (w *windowModel) requests() []model.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]model.Request(nil), w.reqs...)
}

// withLoop replaces the rig's loop by one on adapter with the long
// session settings mod sets (the fake model's window is 4,000 tokens).
func withLoop(r *rig, a model.Adapter, mod func(*agent.Config)) {
	models := model.NewRegistry()
	models.Register("fake", a)
	cfg := agent.Config{Models: models, Tools: r.tools, Prices: price.NewTable(nil, quiet), Logger: quiet,
		Limits: price.NewLimits(map[string]price.Limits{"fake:m": {ContextWindow: 4000, MaxOutputTokens: 200}}),
		History: agent.HistoryFunc(func(ctx context.Context, id string) ([]message.Message, error) {
			msgs, _, err := r.st.Messages(ctx, id, "", 0)
			return msgs, err
		})}
	if mod != nil {
		mod(&cfg)
	}
	r.loop = agent.New(cfg)
}

// seed stores n earlier turns of the session: a user message and an
// answer of size bytes each.
func seed(r *rig, n, size int) {
	r.t.Helper()
	var ops []store.Op
	for i := range n {
		for _, role := range []message.Role{message.RoleUser, message.RoleAssistant} {
			m := message.Message{ID: event.NewID("msg_"), SessionID: r.sid, Role: role, Status: message.StatusComplete,
				Content: []message.Block{message.Text(fmt.Sprintf("%s %d: %s", role, i, strings.Repeat("z", size)))}}
			ops = append(ops, store.PutMessage{Message: m})
		}
	}
	servertest.Must(r.t, r.st.Apply(context.Background(), ops...))
}

// runWith runs a turn like rig.run, with the fields of t set over the
// rig's defaults.
func (r *rig) runWith(ctx context.Context, t agent.Turn) (agent.Outcome, []*event.Event) {
	r.t.Helper()
	turn := event.NewID("turn_")
	if t.UserText == "" {
		t.UserText = "and now?"
	}
	user := message.Message{ID: event.NewID("msg_"), SessionID: r.sid, TurnID: turn, Role: message.RoleUser,
		Content: []message.Block{message.Text(t.UserText)}, Status: message.StatusComplete}
	_, err := r.em.EmitWait(ctx, bus.Spec{Type: event.TurnStarted, TurnID: turn, Actor: "user", Payload: map[string]any{"user_message": user},
		Ops: []store.Op{store.PutMessage{Message: user}, store.PutTurn{Turn: store.Turn{ID: turn, SessionID: r.sid, Status: store.TurnInFlight}}}})
	servertest.Must(r.t, err)
	t.ID, t.SessionID, t.SessionModel, t.Root, t.Emitter, t.Router, t.Ending =
		turn, r.sid, "fake:m", r.root, r.em, routing.NewStatic(), r.ending
	out := r.loop.Run(ctx, t)
	servertest.Must(r.t, r.em.Barrier(context.Background()))
	var evs []*event.Event
	for _, e := range r.rec.Events(r.sid) {
		if e.TurnID == turn {
			evs = append(evs, e)
		}
	}
	return out, evs
}

// storedCompactions returns the compaction blocks stored for the session.
func storedCompactions(r *rig) []*message.Compaction {
	msgs, _, err := r.st.Messages(context.Background(), r.sid, "", 0)
	servertest.Must(r.t, err)
	var out []*message.Compaction
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == message.BlockCompaction {
				out = append(out, b.Compaction)
			}
		}
	}
	return out
}

// TestCompactsBeforeACallThatWouldPassTheWindow: a conversation over the
// window less the reserve is summarised before the call, visibly
// (context.compacting, context.compacted with the compaction message,
// then llm.call_started); the call sends the summary and the recent
// messages, within the window; the summary's cost counts in the turn.
func TestCompactsBeforeACallThatWouldPassTheWindow(t *testing.T) {
	w := &windowModel{summary: "SUMMARY OF EARLIER WORK"}
	r := newRig(t, w)
	withLoop(r, w, func(c *agent.Config) {
		c.Prices = price.NewTable(map[string]price.Price{"fake:*": {Input: 1, Output: 1}}, quiet)
	})
	seed(r, 30, 400) // ~3,500 tokens
	out, evs := r.runWith(context.Background(), agent.Turn{})
	if out.Status != store.TurnCompleted {
		t.Fatalf("outcome %s %s", out.Status, out.Reason)
	}
	want := []event.Type{event.TurnStarted, event.RouteDecided, event.ContextCompacting, event.ContextCompacted,
		event.LLMCallStarted, event.MessageStart, event.TextDelta, event.MessageComplete, event.LLMCallCompleted, event.TurnCompleted}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("sequence\n got %v\nwant %v", got, want)
	}
	cp := payload(t, find(evs, event.ContextCompacted)[0])
	before, after := cp["tokens_before"].(float64), cp["tokens_after"].(float64)
	if cp["trigger"] != "auto" || cp["method"] != "summary" || before <= 4000-200-200 || after >= before || cp["message"] == nil {
		t.Fatalf("context.compacted %v", cp)
	}
	reqs := w.requests()
	call := reqs[len(reqs)-1]
	if reqs[0].Task != model.TaskSummary || !strings.Contains(call.Messages[0].PlainText(), "SUMMARY OF EARLIER WORK") ||
		call.Messages[len(call.Messages)-1].PlainText() != "and now?" {
		t.Fatalf("the call after the compaction sends %d messages, first %q", len(call.Messages), call.Messages[0].PlainText())
	}
	if size := model.EstimateTokens(call) + call.MaxTokens; size > 4000 {
		t.Fatalf("the call is %d tokens", size)
	}
	started := payload(t, find(evs, event.LLMCallStarted)[0])["request"].(map[string]any)
	if started["context_window"] != 4000.0 || started["context_tokens"].(float64) >= before || started["system_sha256"] == "" {
		t.Fatalf("llm.call_started request %v", started)
	}
	if out.Usage.CostUSD <= 0 || out.Usage.InputTokens < 100 {
		t.Fatalf("the summary's usage is not in the turn's: %+v", out.Usage)
	}
	// The session row knows the context's size.
	s, err := r.st.Session(context.Background(), r.sid)
	servertest.Must(t, err)
	if s.ContextWindow != 4000 || s.ContextTokens <= 0 || s.ContextTokens >= int64(before) {
		t.Fatalf("session context %d / %d", s.ContextTokens, s.ContextWindow)
	}
	// Every stored message is still there, and the compaction message.
	msgs, _, _ := r.st.Messages(context.Background(), r.sid, "", 0)
	if len(msgs) != 60+1+1+1 || len(storedCompactions(r)) != 1 {
		t.Fatalf("%d messages stored", len(msgs))
	}
}

// TestCancelDuringCompaction: a cancel while the summary call runs ends
// the summary call, stores no compaction, and ends the turn with
// context.compaction_failed(cancelled) then turn.cancelled(phase
// compaction); no model call is made.
func TestCancelDuringCompaction(t *testing.T) {
	w := &windowModel{blockSummary: make(chan struct{})}
	r := newRig(t, w)
	withLoop(r, w, nil)
	seed(r, 30, 400)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-w.blockSummary
		cancel(&agent.CancelCause{Reason: agent.ReasonUser})
	}()
	out, evs := r.runWith(ctx, agent.Turn{})
	if out.Status != store.TurnCancelled || out.Reason != agent.ReasonUser {
		t.Fatalf("outcome %s %s", out.Status, out.Reason)
	}
	want := []event.Type{event.TurnStarted, event.RouteDecided, event.ContextCompacting, event.ContextCompactionFailed, event.TurnCancelled}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("sequence\n got %v\nwant %v", got, want)
	}
	if p := payload(t, find(evs, event.ContextCompactionFailed)[0]); p["error_class"] != "cancelled" {
		t.Fatalf("context.compaction_failed %v", p)
	}
	if p := payload(t, find(evs, event.TurnCancelled)[0]); p["phase"] != protocol.TurnPhaseCompaction {
		t.Fatalf("turn.cancelled %v", p)
	}
	if n := len(storedCompactions(r)); n != 0 {
		t.Fatalf("%d compactions stored", n)
	}
}

// TestFailedSummaryDropsTheOlderPartAndSaysSo: when the summary call
// fails, the older part leaves the model's view without a summary,
// context.compacted says so (method drop, error), the view's first
// message tells the model, and the turn goes on.
func TestFailedSummaryDropsTheOlderPartAndSaysSo(t *testing.T) {
	w := &windowModel{summaryErr: &model.Error{Class: model.ClassOverloaded, Message: "overloaded"}}
	r := newRig(t, w)
	withLoop(r, w, nil)
	seed(r, 30, 400)
	out, evs := r.runWith(context.Background(), agent.Turn{})
	if out.Status != store.TurnCompleted {
		t.Fatalf("outcome %s %s", out.Status, out.Reason)
	}
	cp := payload(t, find(evs, event.ContextCompacted)[0])
	if cp["method"] != "drop" || !strings.Contains(cp["error"].(string), "overloaded") {
		t.Fatalf("context.compacted %v", cp)
	}
	reqs := w.requests()
	if first := reqs[len(reqs)-1].Messages[0].PlainText(); !strings.Contains(first, "without a summary") {
		t.Fatalf("the view starts with %q", first)
	}
}

// TestOverflowCompactsAndRetriesOnce: a provider's overflow refusal
// (here with no window known beforehand) is answered by a compaction
// (trigger overflow) and the same call made again; a second refusal
// ends the turn with context_overflow.
func TestOverflowCompactsAndRetriesOnce(t *testing.T) {
	overflow := model.Overflow("prompt is too long: 5000 tokens > 4000 maximum", 4000, nil)
	for _, c := range []struct {
		name   string
		errs   []error
		status store.TurnStatus
	}{
		{"retried", []error{overflow}, store.TurnCompleted},
		{"twice", []error{overflow, overflow}, store.TurnFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &windowModel{summary: "S", turnErrs: c.errs}
			r := newRig(t, w)
			withLoop(r, w, func(cfg *agent.Config) { cfg.Limits = nil }) // the window is unknown
			seed(r, 30, 400)
			out, evs := r.runWith(context.Background(), agent.Turn{})
			if out.Status != c.status {
				t.Fatalf("outcome %s %s", out.Status, out.Reason)
			}
			got := types(evs)
			i := slices.Index(got, event.LLMCallFailed)
			want := []event.Type{event.LLMCallFailed, event.ContextCompacting, event.ContextCompacted, event.LLMCallStarted}
			if i < 0 || !slices.Equal(got[i:i+4], want) {
				t.Fatalf("sequence %v", got)
			}
			if p := payload(t, evs[i]); p["error_class"] != model.ClassContextOverflow {
				t.Fatalf("llm.call_failed %v", p)
			}
			if p := payload(t, evs[i+1]); p["trigger"] != "overflow" || p["context_window"] != 4000.0 {
				t.Fatalf("context.compacting %v", p)
			}
			if n := len(find(evs, event.ContextCompacting)); n != 1 {
				t.Fatalf("%d compactions", n)
			}
			if c.status == store.TurnFailed {
				if p := payload(t, find(evs, event.TurnCompleted)[0]); p["error_class"] != model.ClassContextOverflow {
					t.Fatalf("turn.completed %v", p)
				}
			}
			// The retried call does not send the failed call's message.
			reqs := w.requests()
			last := reqs[len(reqs)-1]
			if m := last.Messages[len(last.Messages)-1]; m.Role != message.RoleUser {
				t.Fatalf("the retry ends with a %s message", m.Role)
			}
		})
	}
}

// TestAnswerCutByTheWindowIsLeftOut: an answer that ran into the end of
// the window (Anthropic's stop_reason model_context_window_exceeded)
// keeps its partial text in the stored, failed message, but neither the
// retried call nor a later turn sends it (it would run into the retry's
// answer, or read as a prefill to continue).
func TestAnswerCutByTheWindowIsLeftOut(t *testing.T) {
	w := &windowModel{summary: "S", partial: "PARTIAL ANSWER", turnErrs: []error{model.Overflow("ran into the window", 0, nil)}}
	r := newRig(t, w)
	withLoop(r, w, nil)
	seed(r, 30, 400)
	if out, _ := r.runWith(context.Background(), agent.Turn{}); out.Status != store.TurnCompleted {
		t.Fatalf("outcome %s %s", out.Status, out.Reason)
	}
	if out, _ := r.runWith(context.Background(), agent.Turn{UserText: "next"}); out.Status != store.TurnCompleted {
		t.Fatalf("next turn %s %s", out.Status, out.Reason)
	}
	reqs := w.requests()
	for i, req := range reqs[1:] {
		for _, m := range req.Messages {
			if strings.Contains(m.PlainText(), "PARTIAL ANSWER") {
				t.Fatalf("request %d sends the cut answer", i+1)
			}
		}
	}
	msgs, _, _ := r.st.Messages(context.Background(), r.sid, "", 0)
	found := false
	for _, m := range msgs {
		found = found || m.Status == message.StatusFailed && m.PlainText() == "PARTIAL ANSWER"
	}
	if !found {
		t.Fatal("the cut answer is not stored")
	}
}

// TestAutoCompactOffIsKeptOnOverflow: with auto-compact off, neither a
// call over the window nor a provider's overflow compacts: the turn
// fails with context_overflow (an overflow must not override the
// setting).
func TestAutoCompactOffIsKeptOnOverflow(t *testing.T) {
	w := &windowModel{summary: "S", turnErrs: []error{model.Overflow("prompt is too long", 0, nil)}}
	r := newRig(t, w)
	withLoop(r, w, func(c *agent.Config) { c.AutoCompactOff = true })
	seed(r, 30, 400)
	out, evs := r.runWith(context.Background(), agent.Turn{})
	if out.Status != store.TurnFailed || out.Reason != model.ClassContextOverflow {
		t.Fatalf("outcome %s %s", out.Status, out.Reason)
	}
	if n := len(find(evs, event.ContextCompacting)); n != 0 || len(w.requests()) != 1 {
		t.Fatalf("%d compactions, %d requests", n, len(w.requests()))
	}
}

// TestIrreducibleContextDoesNotLoop: when the recent messages alone do
// not fit (one user message larger than the window), one compaction
// finds nothing to do (no_progress) and the turn fails with
// context_overflow without a model call.
func TestIrreducibleContextDoesNotLoop(t *testing.T) {
	w := &windowModel{summary: "S"}
	r := newRig(t, w)
	withLoop(r, w, nil)
	out, evs := r.runWith(context.Background(), agent.Turn{UserText: strings.Repeat("q", 20000)})
	if out.Status != store.TurnFailed || out.Reason != model.ClassContextOverflow {
		t.Fatalf("outcome %s %s", out.Status, out.Reason)
	}
	want := []event.Type{event.TurnStarted, event.RouteDecided, event.ContextCompacting, event.ContextCompactionFailed, event.TurnCompleted}
	if got := types(evs); !slices.Equal(got, want) || len(w.requests()) != 0 {
		t.Fatalf("sequence %v, %d requests", got, len(w.requests()))
	}
	if p := payload(t, find(evs, event.ContextCompactionFailed)[0]); p["error_class"] != protocol.ClassNoProgress {
		t.Fatalf("context.compaction_failed %v", p)
	}
}

// TestBudgetsEndTheTurn: a call that would pass the turn's or the
// session's cost limit is not made; the turn ends budget_exceeded with
// the limit in budget. max-calls ends a tool loop with max_llm_calls and
// budget kind calls.
func TestBudgetsEndTheTurn(t *testing.T) {
	priced := func(c *agent.Config) {
		c.Prices = price.NewTable(map[string]price.Price{"fake:*": {Input: 10, Output: 10}}, quiet) // $10 per million
	}
	for _, c := range []struct {
		name string
		turn agent.Turn
		kind string
	}{
		{"turn", agent.Turn{MaxTurnCostUSD: 0.001}, protocol.BudgetTurnCost},
		{"session", agent.Turn{MaxSessionCostUSD: 1, SessionCostUSD: 0.9999}, protocol.BudgetSessionCost},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &windowModel{}
			r := newRig(t, w)
			withLoop(r, w, priced)
			seed(r, 5, 400)
			out, evs := r.runWith(context.Background(), c.turn)
			if out.Status != store.TurnFailed || out.Reason != protocol.ClassBudgetExceeded || len(w.requests()) != 0 {
				t.Fatalf("outcome %s %s after %d calls", out.Status, out.Reason, len(w.requests()))
			}
			p := payload(t, find(evs, event.TurnCompleted)[0])
			b := p["budget"].(map[string]any)
			if p["error_class"] != "budget_exceeded" || b["kind"] != c.kind || b["next"].(float64) <= 0 {
				t.Fatalf("turn.completed %v", p)
			}
		})
	}
	t.Run("under the limit", func(t *testing.T) {
		w := &windowModel{}
		r := newRig(t, w)
		withLoop(r, w, priced)
		out, _ := r.runWith(context.Background(), agent.Turn{MaxTurnCostUSD: 1, MaxSessionCostUSD: 1})
		if out.Status != store.TurnCompleted {
			t.Fatalf("outcome %s %s", out.Status, out.Reason)
		}
	})
	t.Run("calls", func(t *testing.T) {
		r := newRig(t, script{deltas: toolCall("tu_1"), result: model.Result{StopReason: model.StopToolUse}})
		r.tools.Register(countingTool{})
		withLoop(r, script{deltas: toolCall("tu_1"), result: model.Result{StopReason: model.StopToolUse}}, func(c *agent.Config) { c.MaxCalls = 2 })
		out, evs := r.runWith(context.Background(), agent.Turn{})
		p := payload(t, find(evs, event.TurnCompleted)[0])
		b, _ := p["budget"].(map[string]any)
		if out.Reason != "max_llm_calls" || b["kind"] != "calls" || b["limit"] != 2.0 || b["spent"] != 2.0 {
			t.Fatalf("turn.completed %v", p)
		}
	})
}

var quiet = slog.New(slog.DiscardHandler)

// countingTool is a tool named block that returns at once.
type countingTool struct{}

func (countingTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (countingTool) Run(ctx context.Context, env tool.Env, in json.RawMessage) (tool.Result, error) {
	return tool.Result{Content: "ok", Summary: "ok"}, nil
}

// TestCompactionModelSummarises: compaction-model writes the summaries
// (the conversation's model only answers the turn); when it cannot be
// used, the compaction falls back to dropping, and says why.
func TestCompactionModelSummarises(t *testing.T) {
	for _, c := range []struct {
		name, model, method string
	}{{"available", "cheap:m", "summary"}, {"unavailable", "gone:m", "drop"}} {
		t.Run(c.name, func(t *testing.T) {
			turnModel, cheap := &windowModel{summary: "FROM THE TURN'S MODEL"}, &windowModel{summary: "FROM THE CHEAP MODEL"}
			r := newRig(t, turnModel)
			withLoop(r, turnModel, func(cfg *agent.Config) {
				cfg.Models.Register("cheap", cheap)
				cfg.CompactionModel = c.model
			})
			seed(r, 30, 400)
			out, evs := r.runWith(context.Background(), agent.Turn{})
			if out.Status != store.TurnCompleted {
				t.Fatalf("outcome %s %s", out.Status, out.Reason)
			}
			cp := payload(t, find(evs, event.ContextCompacted)[0])
			if cp["method"] != c.method || cp["model"] != c.model {
				t.Fatalf("context.compacted %v", cp)
			}
			for _, req := range turnModel.requests() {
				if req.Task == model.TaskSummary {
					t.Fatal("the turn's model summarised")
				}
			}
			if got := len(cheap.requests()); (c.method == "summary") != (got == 1) {
				t.Fatalf("the compaction model got %d requests", got)
			}
		})
	}
}
