package acp

import (
	"context"
	"encoding/json"
	"errors"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// load answers session/load: it attaches to the session's stream with a
// snapshot, replays the conversation it holds (older pages read from
// the messages endpoint first) as session/update notifications, and
// answers. When a turn is running, the snapshot holds its answer as it
// has streamed so far (status streaming): that is replayed too, and the
// follow goes on after the answer, sending the turn's later events as
// live updates until it ends, so nothing is sent twice (the deltas
// after the snapshot continue what was replayed) and nothing is missed.
// A session/cancel for the session meanwhile cancels that turn.
func (a *Agent) load(ctx context.Context, sid string) error {
	sess, err := a.session(ctx, sid)
	if err != nil {
		return err
	}
	t := newTurn(a, sid, sess.WorkspacePath, "")
	t.useHistory(a.readHistory(ctx, sess))
	t.ctx, t.stop = context.WithCancel(a.ctx)
	loaded := make(chan error, 1)
	t.loaded = loaded
	a.inflight.Add(1) // the follow may outlive the request; wait() waits for it
	go func() {
		defer a.inflight.Done()
		defer t.stop()
		defer t.asks.close()
		err := a.c.Follow(t.ctx, sid, client.FollowOptions{
			Filter:   protocol.Filter{IncludeWorkerSessions: true},
			OnUpdate: func(u client.Update) { t.onUpdate(t.ctx, u) },
		})
		if t.loaded != nil { // the follow ended before the replay
			switch {
			case errors.Is(err, client.ErrSessionGone):
				err = &sdk.RequestError{Code: codeResourceNotFound, Message: "session " + sid + ": not found"}
			case t.err != nil:
				err = t.err
			default:
				err = sdk.NewInternalError(map[string]any{"error": "following the session: " + errString(err)})
			}
			t.loaded <- err
		}
		a.mu.Lock()
		if a.turns[sid] == t {
			delete(a.turns, sid)
		}
		a.mu.Unlock()
	}()
	select {
	case err := <-loaded:
		return err
	case <-ctx.Done():
		t.stop()
		return ctx.Err()
	}
}

// newTurn returns a turn of session sid that sends its updates to the
// agent's editor; text is the prompt it submits ("" when it follows a
// turn already running, after session/load).
func newTurn(a *Agent, sid, workspace, text string) *turn {
	return &turn{a: a, sid: sid, workspace: workspace, text: text,
		sent: map[blockKey]string{}, started: map[string]bool{}, complete: map[string]bool{}, held: map[string]bool{},
		tools: map[string]*toolState{}, workers: map[string]string{}, progress: map[string]*progress{},
		outcomes: map[string]outcome{}}
}

// loadedFrom replays the conversation the first snapshot holds, and
// decides whether the follow goes on: only while a turn runs that no
// prompt of this agent already follows.
func (t *turn) loadedFrom(ctx context.Context, v *client.View) {
	err := t.replay(ctx, v)
	running := v.Turn.Status == protocol.TurnStatusInFlight && v.Turn.ID != ""
	if running {
		t.a.mu.Lock()
		if t.a.turns[t.sid] == nil && !t.a.stopping {
			t.a.turns[t.sid] = t
			t.id = v.Turn.ID
		} else {
			running = false
		}
		t.a.mu.Unlock()
	}
	if !running || err != nil {
		t.stop()
	}
	if t.err != nil && err == nil {
		err = t.err
	}
	t.loaded <- err
	t.loaded = nil
	if running {
		t.a.log.Info("following the session's running turn after session/load", "session", t.sid, "turn", t.id)
		// Requests already waiting are asked now; later ones come as
		// events.
		for _, p := range v.PendingApprovals() {
			if p.TurnID == "" || p.TurnID == t.id || p.SessionID != t.sid {
				t.askApproval(ctx, p)
			}
		}
	}
}

// replay sends the conversation as session/load requires, oldest
// first: user text as user_message_chunk, thinking and text as
// agent_thought_chunk and agent_message_chunk, each tool_use as a
// tool_call and its tool_result as the tool_call_update that completes
// (or fails) it. The snapshot's newest messages come last; older ones
// are paged in first. An answer still streaming is sent as far as it
// has streamed (its later deltas continue it), unless the server no
// longer held its start: then it is sent whole when it completes. A
// call that never got a result ends failed, unless its turn is still
// running.
func (t *turn) replay(ctx context.Context, v *client.View) error {
	var pages [][]storedMessage
	before, more := "", v.HasOlder
	if len(v.Messages) > 0 {
		before = v.Messages[0].ID
	}
	for more && before != "" {
		pctx, cancel := context.WithTimeout(ctx, httpTimeout)
		page, m, err := t.a.c.Messages(pctx, t.sid, before, pageSize)
		cancel()
		if err != nil {
			return apiError("read the session's messages", err)
		}
		ms := decodeMessages(page)
		if len(ms) == 0 {
			break
		}
		pages = append(pages, ms)
		before, more = ms[0].ID, m
	}
	var all []storedMessage
	for i := len(pages) - 1; i >= 0; i-- {
		all = append(all, pages[i]...)
	}
	streaming := map[string]*client.Message{}
	for _, m := range v.Messages {
		all = append(all, storedMessage{ID: m.ID, Role: m.Role, TurnID: m.TurnID, Status: m.Status, Content: m.Blocks})
		if m.Status == string(protocol.StatusStreaming) {
			streaming[m.ID] = m
		}
	}
	current := ""
	if v.Turn.Status == protocol.TurnStatusInFlight {
		current = v.Turn.ID
	}
	turnOf := map[string]string{} // tool call id → its turn
	prev := ""                    // the turn of the previous message
	for _, m := range all {
		if t.err != nil {
			break
		}
		if m.TurnID != prev {
			t.endReplayedTurn(ctx, prev, current, turnOf)
			prev = m.TurnID
		}
		if m.Role == string(protocol.RoleAssistant) && m.Status == "cancelled" && t.cancelledTurns[m.TurnID] == "" {
			t.cancelledTurns[m.TurnID] = "cancelled" // no history: the message says it
		}
		for _, b := range m.Content {
			if b != nil && b.Type == "tool_use" {
				turnOf[b.ID] = m.TurnID
			}
		}
		if m.Role == "user" {
			for _, b := range m.Content {
				if b != nil && b.Type == "text" && b.Text != "" {
					t.send(ctx, sdk.UpdateUserMessageText(b.Text))
				}
			}
		}
		if s := streaming[m.ID]; s != nil {
			t.partial(ctx, s)
			continue
		}
		t.reconcileMessages(ctx, []storedMessage{m})
	}
	t.endReplayedTurn(ctx, prev, current, turnOf)
	for _, id := range t.order {
		if s := t.tools[id]; !s.final() && (current == "" || turnOf[id] != current) {
			t.endReplayedCall(ctx, id, s)
		}
	}
	return t.err
}

// endReplayedTurn closes a replayed turn that has ended: its calls that
// got no result end as their events said (failed, cancelled, when the
// history does not know), and a cancelled turn is marked as such.
func (t *turn) endReplayedTurn(ctx context.Context, turnID, current string, turnOf map[string]string) {
	if turnID == "" || turnID == current {
		return
	}
	for _, id := range t.order {
		if s := t.tools[id]; !s.final() && turnOf[id] == turnID {
			t.endReplayedCall(ctx, id, s)
		}
	}
	if reason, ok := t.cancelledTurns[turnID]; ok {
		t.send(ctx, cancelledMarker(reason))
	}
}

func (t *turn) endReplayedCall(ctx context.Context, id string, s *toolState) {
	if o, ok := t.hist[id]; ok {
		t.toolEvent(ctx, o.typ, o.p)
		return
	}
	t.toolEvent(ctx, protocol.EventToolFailed, toolPayload{ToolUseID: id, ToolName: s.name, ErrorClass: "cancelled",
		Message: "the turn ended before this call ran"})
}

// cancelledMarker is the line session/load shows after a cancelled
// turn (live, the prompt's stop reason cancelled says it).
func cancelledMarker(reason string) sdk.SessionUpdate {
	text := "\n\n*Cancelled*"
	if reason != "" && reason != "cancelled" {
		text += " (" + reason + ")"
	}
	u := sdk.UpdateAgentMessageText(text + "\n")
	u.AgentMessageChunk.Meta = map[string]any{"metis": map[string]any{"cancelled": true, "reason": reason}}
	return u
}

// partial sends an answer as far as it has streamed: its text and
// thinking (recorded as sent, so the deltas that follow continue them),
// and its tool calls, with their input once a block has ended. An
// answer whose start the server no longer held is held back: it is sent
// from its final content when it completes.
func (t *turn) partial(ctx context.Context, m *client.Message) {
	t.started[m.ID] = true
	if m.StartMissing {
		t.held[m.ID] = true
		return
	}
	for i, b := range m.Blocks {
		if b == nil {
			continue
		}
		switch b.Type {
		case "text":
			t.chunk(ctx, false, blockKey{m.ID, i}, b.Text)
		case "thinking":
			t.chunk(ctx, true, blockKey{m.ID, i}, b.Thinking)
		case "tool_use":
			// An open block has input {} (its input so far is
			// partial_input, not yet parseable): tool.use_end brings it.
			var in json.RawMessage
			if b.PartialInput == "" && !emptyObject(b.Input) {
				in = b.Input
			}
			t.announce(ctx, b.ID, b.Name, in)
		}
	}
}

// emptyObject reports whether raw is absent or the empty JSON object.
func emptyObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return len(raw) == 0 || json.Unmarshal(raw, &m) == nil && len(m) == 0
}
