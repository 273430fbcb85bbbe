package agent

import (
	"context"
	"errors"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/tool"
)

// DefaultToolConcurrency bounds how many tool calls of one message run at
// once.
const DefaultToolConcurrency = 4

// toolDone is a finished tool call, sent from its goroutine to the
// dispatcher.
type toolDone struct {
	i   int
	res tool.Result
	err error
	dur time.Duration
}

// dispatch runs the tool calls of one assistant message (see
// docs/tool-dispatcher.md). Up to ToolConcurrency run at once, started in
// the message's order; every call ends with exactly one tool.completed or
// tool.failed, emitted as it finishes. A call not started when the turn
// is cancelled fails with cancelled and never runs (spec §6.2.3); a
// running one is cancelled through its context (§6.2.2). All events are
// emitted from this goroutine. The tool results message, in the
// message's order, is persisted with the last terminal event. It returns
// that message, the ids of cancelled calls and whether any call started.
func (r *run) dispatch(c callResult, uses []message.Block) (message.Message, []string, bool) {
	results := message.Message{ID: event.NewID("msg_"), SessionID: r.t.SessionID, TurnID: r.t.ID,
		Role: message.RoleTool, Status: message.StatusComplete, CreatedAt: time.Now(),
		Content: make([]message.Block, len(uses))}
	var cancelled []string
	anyStarted := false
	remaining := len(uses)
	done := make(chan toolDone, len(uses))
	running, next := 0, 0

	// finish records a call's result and emits its terminal event,
	// carrying the results message if it is the last.
	finish := func(i int, payload any, typ event.Type, row *store.ToolCall, block message.Block) {
		ops := append([]store.Op{store.PutToolCall{Call: *row}}, r.storeImages(&block)...)
		results.Content[i] = block
		remaining--
		if remaining == 0 {
			ops = append(ops, store.PutMessage{Message: results})
		}
		r.emit(typ, event.ActorTool, payload, ops...)
		if r.emitErr == nil {
			r.settled[row.ID] = true
		}
	}

	if r.cfg.BeforeTools != nil {
		r.cfg.BeforeTools(r.ctx, r.t.ID)
	}
	// Tools run under their own context: cancelled with the turn, or when
	// an event of the round could not be stored (the turn then stops).
	tctx, stop := context.WithCancelCause(r.ctx)
	defer stop(nil)
	cancelledCh := r.ctx.Done() // nil once the cancel has been handled
	for remaining > 0 {
		if r.emitErr != nil {
			// An event was lost: start nothing more, stop what runs and
			// wait for it (its end is not emitted; Run ends the turn).
			stop(errStopped)
			for ; running > 0; running-- {
				<-done
			}
			break
		}
		// Calls that can no longer start fail now, in order.
		if r.ctx.Err() != nil {
			cancelledCh = nil
			for ; next < len(uses); next++ {
				u := uses[next]
				row := r.tools[u.ID]
				row.Status, row.ErrorClass, row.UpdatedAt = store.ToolCancelled, tool.ClassCancelled, time.Now()
				row.ErrorMessage = "cancelled before it ran: " + reasonOf(r.ctx)
				cancelled = append(cancelled, u.ID)
				finish(next, toolFailed{ToolUseID: u.ID, ToolName: u.Name, ErrorClass: tool.ClassCancelled, Message: row.ErrorMessage},
					event.ToolFailed, row, message.Block{Type: message.BlockToolResult, ToolUseID: u.ID, Content: "cancelled before it ran", IsError: true})
			}
		}
		if next < len(uses) && running < r.cfg.ToolConcurrency {
			u := uses[next]
			row := r.tools[u.ID]
			row.Status, row.UpdatedAt = store.ToolRunning, time.Now()
			r.emit(event.ToolCalled, event.ActorTool, toolCalled{ToolUseID: u.ID, ToolName: u.Name, MessageID: c.msg.ID, Input: u.Input},
				store.PutToolCall{Call: *row})
			if r.emitErr != nil {
				continue // never start a call whose start was not stored
			}
			anyStarted = true
			running++
			go func(i int, u message.Block) {
				start := time.Now()
				res, err := r.runTool(tctx, c, u)
				done <- toolDone{i: i, res: res, err: err, dur: time.Since(start)}
			}(next, u)
			next++
			continue
		}
		if running == 0 {
			break // nothing left to wait for (all cancelled above)
		}
		select {
		case d := <-done:
			running--
			if r.finishTool(d, uses[d.i], finish) {
				cancelled = append(cancelled, uses[d.i].ID)
			}
		case <-cancelledCh:
			// Loop: the pending calls fail; running ones end through ctx.
		}
	}
	return results, cancelled, anyStarted
}

// finishTool emits the terminal event of a finished call and reports
// whether it counts as cancelled.
func (r *run) finishTool(d toolDone, u message.Block, finish func(int, any, event.Type, *store.ToolCall, message.Block)) bool {
	row := r.tools[u.ID]
	row.UpdatedAt = time.Now()
	dur := d.dur.Milliseconds()
	block := message.Block{Type: message.BlockToolResult, ToolUseID: u.ID}
	if d.err == nil {
		row.Status, row.Result = store.ToolCompleted, d.res.Content
		block.Content, block.Images = d.res.Content, d.res.Images
		preview, truncated := d.res.Content, false
		if len(preview) > resultPreviewBytes {
			preview, truncated = truncateUTF8(preview, resultPreviewBytes), true
		}
		finish(d.i, toolCompleted{ToolUseID: u.ID, ToolName: u.Name, Summary: d.res.Summary, Result: preview, Truncated: truncated,
			DurationMS: dur, fileChange: changeOf(d.res.Change)}, event.ToolCompleted, row, block)
		return false
	}
	class, msg := tool.ClassOf(d.err), d.err.Error()
	var te *tool.Error
	if errors.As(d.err, &te) {
		msg = te.Message
	}
	if r.ctx.Err() != nil && (class == tool.ClassCancelled || errors.Is(d.err, context.Canceled)) {
		class, msg = tool.ClassCancelled, "cancelled while running: "+reasonOf(r.ctx)
	}
	row.Status, row.ErrorClass, row.ErrorMessage, row.IsError = store.ToolFailed, class, msg, true
	if class == tool.ClassCancelled {
		row.Status = store.ToolCancelled
	}
	block.Content, block.IsError = msg, true
	finish(d.i, toolFailed{ToolUseID: u.ID, ToolName: u.Name, ErrorClass: class, Message: msg, Started: true, DurationMS: dur},
		event.ToolFailed, row, block)
	return class == tool.ClassCancelled
}

// errStopped is the cause tools are stopped with when the turn stops on
// a lost event.
var errStopped = errors.New("the turn stopped on a server fault")

func (r *run) runTool(ctx context.Context, c callResult, u message.Block) (tool.Result, error) {
	if err := c.acc.InputError(u.ID); err != nil {
		return tool.Result{}, tool.Errorf(tool.ClassInvalidInput, "the model sent input that is not a JSON object: %v", err)
	}
	if u.Name == "" {
		return tool.Result{}, tool.Errorf(tool.ClassInvalidInput, "the model called a tool without giving its name; call one of the tools offered, by name")
	}
	t, ok := r.cfg.Tools.Get(u.Name)
	if !ok {
		return tool.Result{}, tool.Errorf(tool.ClassNotFound, "no tool named %q", u.Name)
	}
	env := tool.Env{Root: r.t.Root, Workspace: r.t.Workspace, SessionID: r.t.SessionID, TurnID: r.t.ID}
	return safeRun(ctx, t, env, u)
}

// safeRun turns a tool's panic into an execution error.
func safeRun(ctx context.Context, t tool.Tool, env tool.Env, u message.Block) (res tool.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = tool.Errorf(tool.ClassExecution, "tool %s panicked: %v", u.Name, p)
		}
	}()
	return t.Run(ctx, env, u.Input)
}

// truncateUTF8 cuts s to at most n bytes on a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
