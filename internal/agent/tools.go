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

// dispatch runs the tool calls of one assistant message in order. Each
// ends with exactly one tool.completed or tool.failed; a tool that has
// not started when the turn is cancelled fails with cancelled without
// running (spec §6.2.3), a running one is cancelled through its context
// (§6.2.2). The tool results message is persisted with the last of those
// events. It returns the results message, the ids of cancelled calls and
// whether any tool started.
func (r *run) dispatch(c callResult, uses []message.Block) (message.Message, []string, bool) {
	results := message.Message{ID: event.NewID("msg_"), SessionID: r.t.SessionID, TurnID: r.t.ID,
		Role: message.RoleTool, Status: message.StatusComplete, CreatedAt: time.Now()}
	var cancelled []string
	anyStarted := false
	for i, u := range uses {
		var extra []store.Op
		last := i == len(uses)-1
		row := r.tools[u.ID]
		block := message.Block{Type: message.BlockToolResult, ToolUseID: u.ID}

		if r.ctx.Err() != nil {
			block.Content, block.IsError = "cancelled before it ran", true
			results.Content = append(results.Content, block)
			cancelled = append(cancelled, u.ID)
			row.Status, row.ErrorClass, row.ErrorMessage = store.ToolCancelled, tool.ClassCancelled, "cancelled before it ran: "+reasonOf(r.ctx)
			row.UpdatedAt = time.Now()
			if last {
				extra = append(extra, store.PutMessage{Message: results})
			}
			r.emit(event.ToolFailed, event.ActorTool, toolFailed{ToolUseID: u.ID, ToolName: u.Name, ErrorClass: tool.ClassCancelled,
				Message: row.ErrorMessage}, append([]store.Op{store.PutToolCall{Call: *row}}, extra...)...)
			continue
		}

		anyStarted = true
		row.Status, row.UpdatedAt = store.ToolRunning, time.Now()
		r.emit(event.ToolCalled, event.ActorTool, toolCalled{ToolUseID: u.ID, ToolName: u.Name, MessageID: c.msg.ID, Input: u.Input},
			store.PutToolCall{Call: *row})
		started := time.Now()
		res, err := r.runTool(c, u)
		dur := time.Since(started).Milliseconds()
		row.UpdatedAt = time.Now()
		if err != nil {
			class := tool.ClassOf(err)
			msg := err.Error()
			if te := (*tool.Error)(nil); errors.As(err, &te) {
				msg = te.Message
			}
			if r.ctx.Err() != nil && (class == tool.ClassCancelled || class == tool.ClassTimeout) {
				class, msg = tool.ClassCancelled, "cancelled while running: "+reasonOf(r.ctx)
			}
			row.Status, row.ErrorClass, row.ErrorMessage, row.IsError = store.ToolFailed, class, msg, true
			if class == tool.ClassCancelled {
				row.Status = store.ToolCancelled
				cancelled = append(cancelled, u.ID)
			}
			block.Content, block.IsError = msg, true
			results.Content = append(results.Content, block)
			if last {
				extra = append(extra, store.PutMessage{Message: results})
			}
			r.emit(event.ToolFailed, event.ActorTool, toolFailed{ToolUseID: u.ID, ToolName: u.Name, ErrorClass: class, Message: msg,
				Started: true, DurationMS: dur}, append([]store.Op{store.PutToolCall{Call: *row}}, extra...)...)
			continue
		}
		row.Status, row.Result = store.ToolCompleted, res.Content
		block.Content = res.Content
		results.Content = append(results.Content, block)
		if last {
			extra = append(extra, store.PutMessage{Message: results})
		}
		preview, truncated := res.Content, false
		if len(preview) > resultPreviewBytes {
			preview, truncated = truncateUTF8(preview, resultPreviewBytes), true
		}
		r.emit(event.ToolCompleted, event.ActorTool, toolCompleted{ToolUseID: u.ID, ToolName: u.Name, Summary: res.Summary,
			Result: preview, Truncated: truncated, DurationMS: dur}, append([]store.Op{store.PutToolCall{Call: *row}}, extra...)...)
	}
	return results, cancelled, anyStarted
}

func (r *run) runTool(c callResult, u message.Block) (tool.Result, error) {
	if err := c.acc.InputError(u.ID); err != nil {
		return tool.Result{}, tool.Errorf(tool.ClassInvalidInput, "the model sent input that is not a JSON object: %v", err)
	}
	t, ok := r.cfg.Tools.Get(u.Name)
	if !ok {
		return tool.Result{}, tool.Errorf(tool.ClassNotFound, "no tool named %q", u.Name)
	}
	env := tool.Env{Root: r.t.Root, Workspace: r.t.Workspace, SessionID: r.t.SessionID, TurnID: r.t.ID}
	return safeRun(r.ctx, t, env, u)
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
