package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/protocol"
)

// ACP has no notion of a worker session, so a delegation is shown inside
// the planner's delegate tool call: its content is a progress log of the
// worker (and of the workers it delegates to in turn), one line per tool
// the worker runs and its outcome, then the worker's latest answer text.
// When the delegate call ends, the log stays and the call's result (the
// worker's final text) follows it.

// maxProgressLines bounds the log kept per delegate call.
const maxProgressLines = 40

type progress struct {
	header string
	lines  []string
	answer string
}

type delegatePayload struct {
	WorkerSessionID string  `json:"worker_session_id"`
	Task            string  `json:"task"`
	Model           string  `json:"model"`
	Summary         string  `json:"summary"`
	FailureMode     string  `json:"failure_mode"`
	Message         string  `json:"message"`
	CostUSD         float64 `json:"cost_usd"`
}

// delegateEvent handles the planner's delegate.* events: delegate.started
// ties the worker session to the running delegate call with the same
// task.
func (t *turn) delegateEvent(ctx context.Context, ev *protocol.EventEnvelope) {
	var p delegatePayload
	if json.Unmarshal(ev.Payload, &p) != nil || p.WorkerSessionID == "" {
		return
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventDelegateStarted:
		call := t.delegateCall(p.Task)
		if call == "" {
			return
		}
		t.workers[p.WorkerSessionID] = call
		t.progress[call] = &progress{header: fmt.Sprintf("Worker %s (%s): %s", p.WorkerSessionID, p.Model, clip(firstLine(p.Task), 120))}
	case protocol.EventDelegateCompleted:
		t.logLine(ctx, p.WorkerSessionID, fmt.Sprintf("worker done ($%.4f)", p.CostUSD))
		return
	case protocol.EventDelegateFailed:
		t.logLine(ctx, p.WorkerSessionID, fmt.Sprintf("worker failed (%s): %s", p.FailureMode, p.Message))
		return
	}
	t.sendProgress(ctx, t.workers[p.WorkerSessionID])
}

// delegateCall finds the running delegate call a new worker belongs to:
// the one whose task matches, else the first without a worker yet.
func (t *turn) delegateCall(task string) string {
	taken := map[string]bool{}
	for _, c := range t.workers {
		taken[c] = true
	}
	first := ""
	for _, id := range t.order {
		s := t.tools[id]
		if s.name != "delegate" || s.final() || taken[id] {
			continue
		}
		if decodeInput(s.input).Task == task {
			return id
		}
		if first == "" {
			first = id
		}
	}
	return first
}

// workerEvent folds an event of a worker session into the progress of
// the delegate call it runs under.
func (t *turn) workerEvent(ctx context.Context, ev *protocol.EventEnvelope) {
	call, ok := t.workers[ev.SessionID]
	if !ok {
		return
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventDelegateStarted: // a worker delegating in turn: same call
		var p delegatePayload
		if json.Unmarshal(ev.Payload, &p) == nil && p.WorkerSessionID != "" {
			t.workers[p.WorkerSessionID] = call
			t.logLine(ctx, ev.SessionID, "delegates: "+clip(firstLine(p.Task), 100))
		}
	case protocol.EventApprovalRequested:
		t.approvalRequested(ctx, ev)
	case protocol.EventApprovalResolved:
		t.approvalResolved(ev)
	case protocol.EventToolCalled, protocol.EventToolCompleted, protocol.EventToolFailed:
		var p toolPayload
		if json.Unmarshal(ev.Payload, &p) != nil {
			return
		}
		switch typ := protocol.EventType(ev.Type); typ {
		case protocol.EventToolCalled:
			t.logLine(ctx, ev.SessionID, "▸ "+toolTitle(p.ToolName, p.Input))
		case protocol.EventToolCompleted:
			t.logLine(ctx, ev.SessionID, "✓ "+p.ToolName+": "+clip(firstLine(p.Summary), 100))
		default:
			t.logLine(ctx, ev.SessionID, "✗ "+p.ToolName+": "+p.ErrorClass+": "+clip(firstLine(p.Message), 100))
		}
		if s := t.tools[p.ToolUseID]; s != nil && s.worker {
			t.toolEvent(ctx, protocol.EventType(ev.Type), p) // a call shown because it asked
		}
	case protocol.EventMessageComplete:
		var p completePayload
		if json.Unmarshal(ev.Payload, &p) != nil {
			return
		}
		var b strings.Builder
		for _, blk := range p.FinalContent {
			if blk != nil && blk.Type == "text" {
				b.WriteString(blk.Text)
			}
		}
		if pr := t.progress[call]; pr != nil && strings.TrimSpace(b.String()) != "" {
			pr.answer = b.String()
			t.sendProgress(ctx, call)
		}
	case protocol.EventLLMCallFailed:
		var p callPayload
		if json.Unmarshal(ev.Payload, &p) == nil && p.ErrorClass != "cancelled" {
			t.logLine(ctx, ev.SessionID, "model call failed: "+p.ErrorClass+": "+p.Message)
		}
	}
}

// logLine appends a line to the progress of the call worker runs under.
func (t *turn) logLine(ctx context.Context, worker, line string) {
	call := t.workers[worker]
	pr := t.progress[call]
	if pr == nil {
		return
	}
	if worker != "" && !strings.Contains(pr.header, worker) {
		line = worker + " " + line
	}
	pr.lines = append(pr.lines, line)
	if len(pr.lines) > maxProgressLines {
		pr.lines = append(pr.lines[:0], pr.lines[len(pr.lines)-maxProgressLines:]...)
	}
	t.sendProgress(ctx, call)
}

// sendProgress replaces the delegate call's content with its progress.
func (t *turn) sendProgress(ctx context.Context, call string) {
	s := t.tools[call]
	if s == nil || s.final() {
		return
	}
	t.send(ctx, sdk.UpdateToolCall(sdk.ToolCallId(call), sdk.WithUpdateContent(t.progressContent(call))))
}

// progressContent is the progress log of a delegate call as tool-call
// content (empty for other calls).
func (t *turn) progressContent(call string) []sdk.ToolCallContent {
	pr := t.progress[call]
	if pr == nil {
		return nil
	}
	text := pr.header
	if len(pr.lines) > 0 {
		text += "\n" + strings.Join(pr.lines, "\n")
	}
	if pr.answer != "" {
		text += "\n\n" + pr.answer
	}
	return []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(text))}
}
