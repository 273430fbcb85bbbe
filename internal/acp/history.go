package acp

import (
	"context"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/protocol"
)

// replay sends a stored session's whole conversation as session/update
// notifications, oldest first, as session/load requires: user text as
// user_message_chunk, thinking and text as agent_thought_chunk and
// agent_message_chunk, each tool_use as a tool_call and its tool_result
// as the tool_call_update that completes (or fails) it. A call that
// never got a result (its turn was cancelled before it ran) ends failed,
// unless its turn is still running.
func (a *Agent) replay(ctx context.Context, sid string) error {
	var pages [][]storedMessage
	before := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, httpTimeout)
		page, more, err := a.c.Messages(pctx, sid, before, pageSize)
		cancel()
		if err != nil {
			return apiError("read the session's messages", err)
		}
		ms := decodeMessages(page)
		pages = append(pages, ms)
		if !more || len(ms) == 0 {
			break
		}
		before = ms[0].ID
	}
	sess, err := a.session(ctx, sid)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	r := &turn{a: a, sid: sid, workspace: sess.WorkspacePath, stop: stop,
		sent: map[blockKey]string{}, complete: map[string]bool{}, held: map[string]bool{},
		tools: map[string]*toolState{}, progress: map[string]*progress{}, workers: map[string]string{}}
	turnOf := map[string]string{} // tool call id → its turn
	for i := len(pages) - 1; i >= 0 && r.err == nil; i-- {
		for _, m := range pages[i] {
			for _, b := range m.Content {
				if b != nil && b.Type == "tool_use" {
					turnOf[b.ID] = m.TurnID
				}
			}
			if m.Role == "user" {
				for _, b := range m.Content {
					if b != nil && b.Type == "text" && b.Text != "" {
						r.send(ctx, sdk.UpdateUserMessageText(b.Text))
					}
				}
			}
			r.reconcileMessages(ctx, []storedMessage{m})
		}
	}
	for _, id := range r.order {
		if s := r.tools[id]; !s.final() && (sess.CurrentTurnID == nil || turnOf[id] != *sess.CurrentTurnID) {
			r.toolEvent(ctx, protocol.EventToolFailed, toolPayload{ToolUseID: id, ToolName: s.name, ErrorClass: "cancelled",
				Message: "the turn ended before this call ran"})
		}
	}
	return r.err
}
