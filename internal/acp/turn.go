package acp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// cancelReason is the reason an ACP session/cancel gives the metis cancel.
const cancelReason = "user_cancel"

// turn is one session/prompt: a metis turn submitted and followed on the
// session's stream until it ends. Its fields below mu are touched only by
// the Follow goroutine.
type turn struct {
	a         *Agent
	sid       string
	workspace string
	text      string
	images    []protocol.ImageInput

	mu           sync.Mutex
	id           string // the metis turn id, once submitted
	cancelWanted bool
	submitting   bool // the turn is being (or was) submitted
	cancelOnce   sync.Once

	ctx context.Context // the follow's: the agent's lifetime, until the turn ends
	// loaded, for a turn followed after session/load rather than
	// submitted, takes the result of the replay (then it is nil).
	loaded chan<- error

	stop      context.CancelFunc // ends the follow
	submitted bool
	resynced  bool   // the next Subscribed carries a fresh snapshot
	last      string // the newest event id handled: older ones are duplicates
	afterGap  bool   // a resync happened: messages started before it are shown from their final content only
	sent      map[blockKey]string
	started   map[string]bool // messages whose message.start was seen
	complete  map[string]bool // messages reconciled with their final content
	held      map[string]bool // messages whose deltas were cut by a gap
	tools     map[string]*toolState
	order     []string          // tool call ids in announcement order
	workers   map[string]string // worker session id → the delegate tool call it runs under
	progress  map[string]*progress
	failure   *callFailure // the last failed model call
	result    *sdk.PromptResponse
	err       error

	asks asks // permission requests open in the editor (permission.go)
	// compaction is set for a /compact prompt: the "turn" is a
	// compaction by hand, whose id stands for the turn id (commands.go).
	compaction *compaction
	// quiet: the turn only folds events and sends nothing (the history
	// read of session/load, history.go).
	quiet bool
	// outcomes are the terminal events of the calls seen; hist those of
	// the history, and cancelledTurns its cancelled turns (session/load).
	outcomes       map[string]outcome
	hist           map[string]outcome
	cancelledTurns map[string]string
}

type blockKey struct {
	msg   string
	index int
}

type callFailure struct{ class, message string }

// Prompt submits the prompt as a metis turn and follows the session until
// the turn ends, sending its events as session/update notifications. It
// answers with the mapped stop reason, or a JSON-RPC error for a failed
// turn. A session/cancel (or a cancelled request) cancels the metis turn;
// the prompt still waits for the cancellation's events and answers
// cancelled. If the editor goes away, the turn keeps running on the server.
func (a *Agent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	if !a.enter() {
		return sdk.PromptResponse{}, errStopping
	}
	defer a.inflight.Done()
	sid := string(p.SessionId)
	text, imgs, err := promptText(p.Prompt)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	if name, arg, ok := parseCommand(text); ok && sid != "" {
		return a.runCommand(ctx, sid, name, arg)
	}
	sess, err := a.session(ctx, sid)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	t := newTurn(a, sid, sess.WorkspacePath, a.withModel(sid, sess, text))
	t.images = imgs
	return a.runTurn(ctx, t)
}

// withModel prefixes a prompt with the model chosen in the editor, when
// it is not the session's own and the prompt names no model itself.
func (a *Agent) withModel(sid string, sess client.Session, text string) string {
	m := a.ui.chosenModel(sid)
	if m == "" || m == sess.ActiveModel || strings.HasPrefix(strings.TrimSpace(text), "/model ") {
		return text
	}
	return "/model " + m + " " + text
}

// runTurn runs a prompt's turn (or /compact's compaction) as the
// session's one prompt in flight, and answers it.
func (a *Agent) runTurn(ctx context.Context, t *turn) (sdk.PromptResponse, error) {
	sid := t.sid
	a.mu.Lock()
	if a.turns[sid] != nil {
		a.mu.Unlock()
		return sdk.PromptResponse{}, sdk.NewInvalidRequest(map[string]any{"error": "a prompt is already running in this session"})
	}
	a.turns[sid] = t
	a.mu.Unlock()
	t.ctx, t.stop = context.WithCancel(a.ctx)
	defer t.stop()
	defer func() {
		a.mu.Lock()
		delete(a.turns, sid)
		a.mu.Unlock()
	}()
	// The SDK cancels the request's context on session/cancel and
	// $/cancel_request, and when the editor goes away: only the first two
	// cancel the turn.
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-a.done():
		default:
			t.requestCancel()
		}
	})
	defer stop()
	defer t.asks.close()
	return t.run()
}

func (a *Agent) done() <-chan struct{} {
	if a.conn == nil {
		return a.ctx.Done()
	}
	return a.conn.Done()
}

// requestCancel cancels the metis turn, once; before the turn is
// submitted it is remembered and done right after.
func (t *turn) requestCancel() {
	t.mu.Lock()
	t.cancelWanted = true
	id, submitting := t.id, t.submitting
	t.mu.Unlock()
	switch {
	case id != "":
		t.cancelOnce.Do(func() { t.cancelOnServer(id) })
	case !submitting:
		// Nothing started on the server (it may be unreachable): the
		// prompt ends cancelled at once.
		t.stop()
	}
}

// startSubmit reports whether the turn may be submitted: not once a
// cancel came first.
func (t *turn) startSubmit() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancelWanted {
		return false
	}
	t.submitting = true
	return true
}

func (t *turn) setID(id string) {
	t.mu.Lock()
	t.id = id
	wanted := t.cancelWanted
	t.mu.Unlock()
	if wanted {
		t.cancelOnce.Do(func() { t.cancelOnServer(id) })
	}
}

func (t *turn) cancelOnServer(id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.a.ctx), httpTimeout)
	defer cancel()
	if err := t.a.c.Cancel(ctx, t.sid, id, cancelReason); err != nil {
		t.a.log.Warn("cancel the turn", "session", t.sid, "turn", id, "err", err)
	}
}

func (t *turn) run() (sdk.PromptResponse, error) {
	ctx := t.ctx
	err := t.a.c.Follow(ctx, t.sid, client.FollowOptions{
		Filter:   protocol.Filter{IncludeWorkerSessions: true},
		OnUpdate: func(u client.Update) { t.onUpdate(ctx, u) },
	})
	switch {
	case t.result != nil:
		return *t.result, nil
	case t.err != nil:
		return sdk.PromptResponse{}, t.err
	case t.cancelledBeforeSubmit():
		return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
	case errors.Is(err, client.ErrSessionGone):
		return sdk.PromptResponse{}, &sdk.RequestError{Code: codeResourceNotFound, Message: "session " + t.sid + ": not found"}
	case t.a.ctx.Err() != nil:
		return sdk.PromptResponse{}, sdk.NewInternalError(map[string]any{"error": "the agent is stopping; the turn goes on on the server"})
	}
	return sdk.PromptResponse{}, sdk.NewInternalError(map[string]any{"error": "following the session: " + errString(err)})
}

func (t *turn) cancelledBeforeSubmit() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cancelWanted && !t.submitting
}

func errString(err error) string {
	if err == nil {
		return "ended"
	}
	return err.Error()
}

func (t *turn) onUpdate(ctx context.Context, u client.Update) {
	if t.result != nil || t.err != nil {
		return
	}
	switch u.Kind {
	case client.Subscribed:
		t.last = max(t.last, u.View.LastEventID)
		if !t.submitted && t.loaded != nil {
			t.submitted = true
			t.loadedFrom(ctx, u.View)
			return
		}
		if !t.submitted {
			t.submitted = true
			if !t.startSubmit() {
				t.stop()
				return
			}
			// Not cut short by a cancel: the turn id is needed to cancel
			// the turn the server may already have started.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpTimeout)
			var (
				id  string
				err error
			)
			if t.compaction != nil {
				id, err = t.submitCompaction(sctx)
			} else {
				var acc client.TurnAccepted
				acc, err = t.a.c.SubmitTurn(sctx, t.sid, client.TurnRequest{Content: t.text, Images: t.images})
				id = acc.TurnID
			}
			cancel()
			if err != nil {
				t.err = apiError("submit the turn", err)
				t.stop()
				return
			}
			t.setID(id)
			t.a.log.Info("turn submitted", "session", t.sid, "turn", id)
			return
		}
		if t.resynced {
			t.resynced = false
			t.fromSnapshot(ctx, u.View)
		}
	case client.Resynced:
		t.resynced = true
		t.afterGap = true
		for m := range t.started {
			if !t.complete[m] {
				t.held[m] = true
			}
		}
		t.a.log.Info("stream resynced from a snapshot", "session", t.sid)
	case client.Reconnecting:
		t.a.log.Info("stream dropped; reconnecting", "session", t.sid, "attempt", u.Attempt, "err", u.Err)
	case client.EventApplied:
		ev := u.Event
		if ev.ID != "" {
			if ev.ID <= t.last {
				return // a replay overlap: already sent
			}
			t.last = ev.ID
		}
		t.handle(ctx, ev, u.View)
	}
}

// Payloads of the events the mapping reads.
type (
	deltaPayload struct {
		MessageID  string          `json:"message_id"`
		Index      int             `json:"content_block_index"`
		Text       string          `json:"text"`
		ToolUseID  string          `json:"tool_use_id"`
		ToolName   string          `json:"tool_name"`
		FinalInput json.RawMessage `json:"final_input"`
	}
	completePayload struct {
		MessageID    string          `json:"message_id"`
		FinalContent []*client.Block `json:"final_content"`
	}
	usagePayload struct {
		InputTokens         int     `json:"input_tokens"`
		OutputTokens        int     `json:"output_tokens"`
		CacheReadTokens     int     `json:"cache_read_tokens"`
		CacheCreationTokens int     `json:"cache_creation_tokens"`
		CostUSD             float64 `json:"cost_usd"`
	}
	callPayload struct {
		MessageID  string       `json:"message_id"`
		ErrorClass string       `json:"error_class"`
		Message    string       `json:"message"`
		Usage      usagePayload `json:"usage"`
		// The conversation's size after the call and the model's
		// window (llm.call_completed; 0 when unknown).
		ContextTokens int `json:"context_tokens"`
		ContextWindow int `json:"context_window"`
	}
	toolPayload struct {
		ToolUseID string          `json:"tool_use_id"`
		ToolName  string          `json:"tool_name"`
		Input     json.RawMessage `json:"input"`
		Summary   string          `json:"summary"`
		// The tools that change files: the paths changed and their
		// unified diff (cut at 64 KiB, then DiffTruncated).
		Paths         []string `json:"paths"`
		Diff          string   `json:"diff"`
		DiffTruncated bool     `json:"diff_truncated"`
		Result        string   `json:"result"`
		Truncated     bool     `json:"truncated"`
		// Via: "editor" or "disk" while an editor was attached.
		Via string `json:"via"`
		// ExitCode: a shell command's.
		ExitCode   *int   `json:"exit_code"`
		ErrorClass string `json:"error_class"`
		Message    string `json:"message"`
	}
	turnEndPayload struct {
		Outcome    string       `json:"outcome"`
		StopReason string       `json:"stop_reason"`
		ErrorClass string       `json:"error_class"`
		Reason     string       `json:"reason"`
		Usage      usagePayload `json:"usage"`
	}
)

// handle maps one event of the session (or of one of its workers).
func (t *turn) handle(ctx context.Context, ev *protocol.EventEnvelope, v *client.View) {
	if ev.SessionID != t.sid {
		t.workerEvent(ctx, ev)
		return
	}
	// Renames and mode changes are the session's standing follower's
	// (watch.go), whether a turn runs or not.
	switch protocol.EventType(ev.Type) {
	case protocol.EventApprovalResolved:
		t.approvalResolved(ev)
		return
	case protocol.EventContextCompacting, protocol.EventContextCompacted, protocol.EventContextCompactionFailed:
		if t.compaction != nil {
			t.compactionEvent(ctx, ev)
		}
		return
	}
	if ev.TurnID == nil || *ev.TurnID != t.id {
		return
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventApprovalRequested:
		t.approvalRequested(ctx, ev)
	case protocol.EventMessageStart:
		var p deltaPayload
		if json.Unmarshal(ev.Payload, &p) == nil {
			t.started[p.MessageID] = true
		}
	case protocol.EventTextDelta, protocol.EventThinkingDelta:
		var p deltaPayload
		if json.Unmarshal(ev.Payload, &p) != nil {
			return
		}
		m := p.MessageID
		if t.complete[m] || t.held[m] || (t.afterGap && !t.started[m]) {
			return // shown from the final content instead
		}
		t.chunk(ctx, protocol.EventType(ev.Type) == protocol.EventThinkingDelta, blockKey{m, p.Index}, p.Text)
	case protocol.EventToolUseStart:
		var p deltaPayload
		if json.Unmarshal(ev.Payload, &p) == nil {
			t.announce(ctx, p.ToolUseID, p.ToolName, nil)
		}
	case protocol.EventToolUseEnd:
		var p deltaPayload
		if json.Unmarshal(ev.Payload, &p) == nil {
			t.input(ctx, p.ToolUseID, p.ToolName, p.FinalInput)
		}
	case protocol.EventMessageComplete:
		var p completePayload
		if json.Unmarshal(ev.Payload, &p) == nil {
			t.reconcile(ctx, p.MessageID, p.FinalContent)
		}
	case protocol.EventLLMCallCompleted, protocol.EventLLMCallFailed:
		var p callPayload
		if json.Unmarshal(ev.Payload, &p) != nil {
			return
		}
		if protocol.EventType(ev.Type) == protocol.EventLLMCallFailed && p.ErrorClass != "cancelled" {
			t.failure = &callFailure{class: p.ErrorClass, message: p.Message}
		}
		t.usage(ctx, p, v.CostUSD)
	case protocol.EventToolCalled, protocol.EventToolCompleted, protocol.EventToolFailed:
		var p toolPayload
		if json.Unmarshal(ev.Payload, &p) == nil {
			t.toolEvent(ctx, protocol.EventType(ev.Type), p)
			if s := t.tools[p.ToolUseID]; s != nil && protocol.EventType(ev.Type) == protocol.EventToolCalled {
				t.openTerminal(ctx, ev.ID, s, p.ToolUseID) // terminal.go
			}
		}
	case protocol.EventDelegateStarted, protocol.EventDelegateCompleted, protocol.EventDelegateFailed:
		t.delegateEvent(ctx, ev)
	case protocol.EventTurnCompleted, protocol.EventTurnCancelled:
		var p turnEndPayload
		_ = json.Unmarshal(ev.Payload, &p)
		t.reconcileStored(ctx)
		t.finish(protocol.EventType(ev.Type), p)
	}
}

// send sends one session/update; a failed write (the editor is gone)
// ends the follow.
func (t *turn) send(ctx context.Context, u sdk.SessionUpdate) {
	if t.quiet {
		return
	}
	if err := t.a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sdk.SessionId(t.sid), Update: u}); err != nil {
		if t.err == nil && t.result == nil {
			t.err = sdk.NewInternalError(map[string]any{"error": "sending an update: " + err.Error()})
		}
		t.stop()
	}
}

// chunk sends a text or thinking delta and records it as sent.
func (t *turn) chunk(ctx context.Context, thinking bool, k blockKey, text string) {
	if text == "" {
		return
	}
	if thinking {
		t.send(ctx, sdk.UpdateAgentThoughtText(text))
	} else {
		t.send(ctx, sdk.UpdateAgentMessageText(text))
	}
	t.sent[k] += text
}

// reconcile brings what the editor has of a message up to its final
// content: the text of each block not yet sent (deltas missed in a gap),
// and tool calls not yet announced. Text sent is always a prefix of the
// final text, so nothing is sent twice.
func (t *turn) reconcile(ctx context.Context, msgID string, blocks []*client.Block) {
	for i, b := range blocks {
		if b == nil {
			continue
		}
		switch b.Type {
		case "text", "thinking":
			full := b.Text
			if b.Type == "thinking" {
				full = b.Thinking
			}
			k := blockKey{msgID, i}
			sent := t.sent[k]
			if !strings.HasPrefix(full, sent) {
				t.a.log.Warn("streamed text disagrees with the final content", "message", msgID, "block", i)
				continue
			}
			t.chunk(ctx, b.Type == "thinking", k, full[len(sent):])
		case "tool_use":
			t.announce(ctx, b.ID, b.Name, b.Input)
			t.input(ctx, b.ID, b.Name, b.Input)
		}
	}
	t.complete[msgID] = true
	delete(t.held, msgID)
}

// usage sends a usage_update after a model call of the turn: the tokens
// of the call (what the model had in context, as the server counted
// it), the model's context window (size; 0 when unknown), and the
// session's cumulative cost, workers included.
func (t *turn) usage(ctx context.Context, p callPayload, costUSD float64) {
	u := p.Usage
	used := u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheCreationTokens
	if p.ContextTokens > 0 {
		used = p.ContextTokens
	}
	t.send(ctx, sdk.SessionUpdate{UsageUpdate: &sdk.SessionUsageUpdate{
		Used: used, Size: p.ContextWindow, Cost: &sdk.Cost{Amount: costUSD, Currency: "USD"},
		Meta: map[string]any{"metis": map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "call_cost_usd": u.CostUSD}},
	}})
}

// finish maps the end of the turn to the prompt's answer and ends the
// follow.
func (t *turn) finish(typ protocol.EventType, p turnEndPayload) {
	defer t.stop()
	usage := &sdk.Usage{InputTokens: p.Usage.InputTokens, OutputTokens: p.Usage.OutputTokens,
		TotalTokens: p.Usage.InputTokens + p.Usage.OutputTokens + p.Usage.CacheReadTokens + p.Usage.CacheCreationTokens}
	if p.Usage.CacheReadTokens > 0 {
		usage.CachedReadTokens = sdk.Ptr(p.Usage.CacheReadTokens)
	}
	if p.Usage.CacheCreationTokens > 0 {
		usage.CachedWriteTokens = sdk.Ptr(p.Usage.CacheCreationTokens)
	}
	meta := map[string]any{"metis": map[string]any{"turn_id": t.id}}
	if typ == protocol.EventTurnCancelled {
		meta["metis"].(map[string]any)["cancel_reason"] = p.Reason
		t.result = &sdk.PromptResponse{StopReason: sdk.StopReasonCancelled, Usage: usage, Meta: meta}
		return
	}
	if p.Outcome == "failed" {
		if p.ErrorClass == "max_llm_calls" {
			t.result = &sdk.PromptResponse{StopReason: sdk.StopReasonMaxTurnRequests, Usage: usage, Meta: meta}
			return
		}
		t.err = turnFailed(t.id, p.ErrorClass, t.failure)
		return
	}
	t.result = &sdk.PromptResponse{StopReason: stopReason(p.StopReason), Usage: usage, Meta: meta}
}

// stopReason maps a metis stop reason to ACP's.
func stopReason(s string) sdk.StopReason {
	switch s {
	case "max_tokens":
		return sdk.StopReasonMaxTokens
	case "refusal":
		return sdk.StopReasonRefusal
	case "cancelled":
		return sdk.StopReasonCancelled
	}
	return sdk.StopReasonEndTurn // end_turn, stop_sequence
}

// codeTurnFailed is the JSON-RPC error code of a failed turn.
const codeTurnFailed = -32603

// turnFailed is the JSON-RPC error of a failed turn: its error class and
// the failed model call's message.
func turnFailed(turnID, class string, f *callFailure) error {
	msg := "the turn failed"
	if class != "" {
		msg += ": " + class
	}
	data := map[string]any{"error_class": class, "turn_id": turnID}
	if f != nil {
		msg += ": " + f.message
		data["message"] = f.message
		if class == "" {
			data["error_class"] = f.class
		}
	}
	return &sdk.RequestError{Code: codeTurnFailed, Message: msg, Data: data}
}
