// Package delegate owns the delegate tool (contract §5, spec §6.4, §7):
// a planner hands a sub-task to a worker session (parent_session_id = the
// planner's, same workspace), runs one turn on it, and gets the worker's
// final text as the tool result. The planner's stream carries
// delegate.started and then delegate.completed or delegate.failed; the
// worker's own events belong to the worker session (attachable directly,
// or interleaved into the planner's stream with include_worker_sessions).
//
// delegate imports agent, bus, event, model, session, store, tool and
// protocol (the failure modes of delegate.failed); the server registers
// it in the tool registry once the session manager exists.
package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// Defaults.
const (
	// DefaultMaxDepth bounds nesting: a planner (depth 0) may start
	// workers down to this depth.
	DefaultMaxDepth = 3
	maxTaskBytes    = 64 << 10
	summaryRunes    = 200
)

// Sessions is what the tool needs of the session manager.
type Sessions interface {
	Create(ctx context.Context, req session.CreateRequest) (session.Summary, error)
	RunTurn(ctx context.Context, sessionID, content, model string) (agent.Outcome, error)
}

// Store reads session rows (for the parent chain).
type Store interface {
	Session(ctx context.Context, id string) (store.Session, error)
}

// Tool is the delegate tool.
type Tool struct {
	Sessions Sessions
	Store    Store
	Bus      *bus.Bus
	Models   *model.Registry
	// MaxDepth bounds nesting (0: DefaultMaxDepth).
	MaxDepth int
	// Timeout bounds one worker turn (0: none beyond the planner's).
	Timeout time.Duration
}

// Spec implements tool.Tool.
func (t *Tool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "delegate",
		Description: "Hand a self-contained sub-task to a worker agent working in the same workspace. The worker runs one turn with the same tools and returns its final answer as text. Give it everything it needs in the task.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"the sub-task, self-contained"},"model":{"type":"string","description":"provider:model for the worker (default: the routing policy's choice for workers)"}},"required":["task"]}`)}
}

// Run implements tool.Tool.
func (t *Tool) Run(ctx context.Context, env tool.Env, input json.RawMessage) (tool.Result, error) {
	var in struct {
		Task  string `json:"task"`
		Model string `json:"model"`
	}
	if err := json.Unmarshal(orEmpty(input), &in); err != nil {
		return tool.Result{}, tool.Errorf(tool.ClassInvalidInput, "input is not a valid object for delegate: %v", err)
	}
	if strings.TrimSpace(in.Task) == "" {
		return tool.Result{}, tool.Errorf(tool.ClassInvalidInput, "task is required")
	}
	if len(in.Task) > maxTaskBytes {
		return tool.Result{}, tool.Errorf(tool.ClassInvalidInput, "task is longer than %d bytes", maxTaskBytes)
	}
	if in.Model != "" {
		if err := t.Models.Check(in.Model); err != nil {
			_, msg := model.Classify(err)
			return tool.Result{}, tool.Errorf(tool.ClassInvalidInput, "%s", msg)
		}
	}
	planner, err := t.Store.Session(ctx, env.SessionID)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.ClassExecution, "planner session: %v", err)
	}
	depth, err := t.depth(ctx, planner)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.ClassExecution, "planner session: %v", err)
	}
	if max := t.maxDepth(); depth >= max {
		return tool.Result{}, tool.Errorf(tool.ClassInvalidInput, "delegation depth limit reached (%d levels): do this sub-task yourself", max)
	}
	em, err := t.Bus.Emitter(ctx, env.SessionID)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.ClassExecution, "%v", err)
	}
	workerModel := in.Model
	if workerModel == "" {
		workerModel = planner.ActiveModel
	}
	// The worker takes the planner's mode (and follows its changes while
	// it runs: session.SetMode).
	worker, err := t.Sessions.Create(ctx, session.CreateRequest{WorkspacePath: planner.WorkspacePath, Model: workerModel,
		ParentSessionID: planner.ID, Mode: planner.Mode})
	if err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, ctx.Err() // cancelled while starting the worker
		}
		return tool.Result{}, tool.Errorf(tool.ClassExecution, "could not start a worker: %v", err)
	}
	// A delegate.* event that cannot be emitted (the bus is closing) is
	// dropped: the planner still learns the outcome through tool.*.
	emit := func(typ event.Type, payload map[string]any) {
		payload["worker_session_id"] = worker.ID
		_, _ = em.Emit(bus.Spec{Type: typ, TurnID: env.TurnID, Actor: event.ActorTool, Payload: payload})
	}
	emit(event.DelegateStarted, map[string]any{"task": in.Task, "model": worker.ActiveModel, "depth": depth + 1})

	wctx, cancel := ctx, context.CancelFunc(func() {})
	if t.Timeout > 0 {
		wctx, cancel = context.WithTimeoutCause(ctx, t.Timeout, &agent.CancelCause{Reason: "delegate_timeout"})
	}
	defer cancel()
	// A model named in the call wins over the routing policy's choice
	// for workers.
	out, err := t.Sessions.RunTurn(wctx, worker.ID, in.Task, in.Model)
	switch {
	case ctx.Err() != nil:
		emit(event.DelegateFailed, map[string]any{"failure_mode": protocol.DelegateFailureCancelled,
			"message": "the planner's turn was cancelled; the worker was cancelled with it", "cost_usd": out.Usage.CostUSD})
		return tool.Result{}, ctx.Err()
	case wctx.Err() != nil:
		emit(event.DelegateFailed, map[string]any{"failure_mode": protocol.DelegateFailureTimeout,
			"message": fmt.Sprintf("the worker ran longer than %s", t.Timeout), "cost_usd": out.Usage.CostUSD})
		return tool.Result{}, tool.Errorf(tool.ClassTimeout, "the worker ran longer than %s and was cancelled", t.Timeout)
	case err != nil:
		emit(event.DelegateFailed, map[string]any{"failure_mode": protocol.DelegateFailureWorker, "message": err.Error()})
		return tool.Result{}, tool.Errorf(tool.ClassExecution, "the worker could not run: %v", err)
	case out.Status != store.TurnCompleted:
		msg := fmt.Sprintf("the worker's turn ended %s (%s)", out.Status, out.Reason)
		emit(event.DelegateFailed, map[string]any{"failure_mode": protocol.DelegateFailureWorker, "message": msg, "cost_usd": out.Usage.CostUSD})
		return tool.Result{}, tool.Errorf(tool.ClassExecution, "%s", msg)
	}
	emit(event.DelegateCompleted, map[string]any{"success": true, "summary": summarize(out.FinalText), "cost_usd": out.Usage.CostUSD})
	text := out.FinalText
	if text == "" {
		text = "(the worker finished without a text answer)"
	}
	return tool.Result{Content: text, Summary: "worker " + worker.ID + ": " + summarize(out.FinalText)}, nil
}

func (t *Tool) maxDepth() int {
	if t.MaxDepth > 0 {
		return t.MaxDepth
	}
	return DefaultMaxDepth
}

// depth counts the planner's ancestors.
func (t *Tool) depth(ctx context.Context, s store.Session) (int, error) {
	d := 0
	for s.ParentSessionID != "" {
		d++
		if d > 64 {
			return 0, errors.New("session parent chain is too long or cyclic")
		}
		var err error
		if s, err = t.Store.Session(ctx, s.ParentSessionID); err != nil {
			return 0, err
		}
	}
	return d, nil
}

func summarize(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= summaryRunes {
		return s
	}
	return string([]rune(s)[:summaryRunes]) + "…"
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}
