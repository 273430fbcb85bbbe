package agent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
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

// Where a call of a round is (see dispatch).
type callState uint8

const (
	stNew     callState = iota // not decided yet
	stQueued                   // must ask, waiting for room among the open requests
	stAsking                   // waiting for an answer
	stHeld                     // decided, waiting for a start (or for the cancellation)
	stReady                    // allowed, waiting for a free slot
	stRunning                  // started
	stDone                     // its terminal event is emitted
)

// round is the state of one dispatch.
type round struct {
	r        *run
	c        callResult
	uses     []message.Block
	st       []callState
	verdict  []permission.Verdict
	call     []*permission.Call
	approval []string // the open request of each asking call
	answers  chan Answer
	asking   int
	asked    bool // a request was opened
	finish   func(i int, payload any, typ event.Type, row *store.ToolCall, block message.Block)
}

// dispatch runs the tool calls of one assistant message (see
// docs/tool-dispatcher.md). Each call is first decided by the turn's
// permissions (docs/permissions.md): allowed calls run, refused ones
// fail with permission_denied, and the others ask, each request on its
// own (approval.requested; at most MaxPendingApprovals open at once),
// and run or fail once answered (approval.resolved). Up to
// ToolConcurrency calls run at once, started in the message's order. A
// call not started when the turn is cancelled fails with cancelled and
// never runs (spec §6.2.3), its request first denied with reason
// cancelled; a running one is cancelled through its context (§6.2.2).
// All events are emitted from this goroutine. The tool results message,
// in the message's order, is persisted with the last terminal event. It
// returns that message, the ids of cancelled calls, whether any call
// started and whether any asked.
func (r *run) dispatch(c callResult, uses []message.Block) (message.Message, []string, bool, bool) {
	results := message.Message{ID: event.NewID("msg_"), SessionID: r.t.SessionID, TurnID: r.t.ID,
		Role: message.RoleTool, Status: message.StatusComplete, CreatedAt: time.Now(),
		Content: make([]message.Block, len(uses))}
	var cancelled []string
	anyStarted := false
	remaining := len(uses)
	done := make(chan toolDone, len(uses))
	running := 0
	rd := &round{r: r, c: c, uses: uses, st: make([]callState, len(uses)), verdict: make([]permission.Verdict, len(uses)),
		call: make([]*permission.Call, len(uses)), approval: make([]string, len(uses)),
		answers: make(chan Answer, len(uses))}

	// finish records a call's result and emits its terminal event,
	// carrying the results message if it is the last.
	rd.finish = func(i int, payload any, typ event.Type, row *store.ToolCall, block message.Block) {
		ops := append([]store.Op{store.PutToolCall{Call: *row}}, r.storeImages(&block)...)
		results.Content[i] = block
		remaining--
		rd.st[i] = stDone
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
	if r.ctx.Err() == nil {
		for i := range uses {
			rd.decide(i)
		}
		rd.openQueued()
	}
	for remaining > 0 {
		if r.emitErr != nil {
			// An event was lost: start nothing more, give up on the open
			// requests, stop what runs and wait for it (its end is not
			// emitted; Run ends the turn).
			rd.abandon()
			stop(errStopped)
			for ; running > 0; running-- {
				<-done
			}
			break
		}
		// Calls that can no longer start fail now, in order, after their
		// open requests are denied (reason cancelled).
		if r.ctx.Err() != nil {
			cancelledCh = nil
			rd.cancelRequests()
			for i, u := range uses {
				if rd.st[i] == stRunning || rd.st[i] == stDone {
					continue
				}
				row := r.tools[u.ID]
				row.Status, row.ErrorClass, row.UpdatedAt = store.ToolCancelled, tool.ClassCancelled, time.Now()
				row.ErrorMessage = "cancelled before it ran: " + reasonOf(r.ctx)
				cancelled = append(cancelled, u.ID)
				rd.finish(i, toolFailed{ToolUseID: u.ID, ToolName: u.Name, ErrorClass: tool.ClassCancelled, Message: row.ErrorMessage},
					event.ToolFailed, row, message.Block{Type: message.BlockToolResult, ToolUseID: u.ID, Content: "cancelled before it ran", IsError: true})
				if r.emitErr != nil {
					break
				}
			}
			if r.emitErr != nil {
				continue
			}
		}
		if i := rd.nextReady(); i >= 0 && running < r.cfg.ToolConcurrency {
			u := uses[i]
			if r.checkpointBefore(u); r.ctx.Err() != nil || r.emitErr != nil {
				continue // checkpoint.go saved the files; a cancel that came meanwhile fails the call unstarted
			}
			row := r.tools[u.ID]
			row.Status, row.UpdatedAt = store.ToolRunning, time.Now()
			r.emit(event.ToolCalled, event.ActorTool, toolCalled{ToolUseID: u.ID, ToolName: u.Name, MessageID: c.msg.ID, Input: u.Input},
				store.PutToolCall{Call: *row})
			if r.emitErr != nil {
				continue // never start a call whose start was not stored
			}
			rd.st[i] = stRunning
			anyStarted = true
			running++
			go func(i int, u message.Block) {
				start := time.Now()
				res, err := r.runTool(tctx, c, u)
				done <- toolDone{i: i, res: res, err: err, dur: time.Since(start)}
			}(i, u)
			continue
		}
		if running == 0 && rd.asking == 0 {
			break // nothing left to wait for (all ended above)
		}
		select {
		case d := <-done:
			running--
			if r.finishTool(d, uses[d.i], rd.finish) {
				cancelled = append(cancelled, uses[d.i].ID)
			}
		case a := <-rd.answers:
			rd.answered(a)
		case <-cancelledCh:
			// Loop: the pending calls fail; running ones end through ctx.
		}
	}
	return results, cancelled, anyStarted, rd.asked
}

// decide asks the turn's permissions about call i: an allowed call is
// ready to start, a refused one fails now, and one that must ask is
// queued to ask.
func (rd *round) decide(i int) {
	r, u := rd.r, rd.uses[i]
	v, call := r.check(rd.c, u)
	rd.verdict[i], rd.call[i] = v, call
	switch v.Action {
	case permission.Allow:
		rd.st[i] = stReady
	case permission.Deny:
		rd.fail(i, deniedMessage(v, r.t.Permissions.Mode()))
	default:
		rd.st[i] = stQueued
	}
}

// fail ends call i, which never started, with permission_denied.
func (rd *round) fail(i int, msg string) {
	u := rd.uses[i]
	row := rd.r.tools[u.ID]
	row.Status, row.ErrorClass, row.ErrorMessage, row.IsError, row.UpdatedAt = store.ToolFailed, tool.ClassPermissionDenied, msg, true, time.Now()
	rd.finish(i, toolFailed{ToolUseID: u.ID, ToolName: u.Name, ErrorClass: tool.ClassPermissionDenied, Message: msg},
		event.ToolFailed, row, message.Block{Type: message.BlockToolResult, ToolUseID: u.ID, Content: msg, IsError: true})
}

// openQueued opens the queued requests, in order, while there is room.
// A call that waited for room is decided again first: the mode or the
// session's rules may have changed meanwhile.
func (rd *round) openQueued() {
	r := rd.r
	for i := range rd.uses {
		if rd.st[i] != stQueued || r.emitErr != nil || r.ctx.Err() != nil {
			continue
		}
		if rd.asking >= r.cfg.MaxPendingApprovals {
			return
		}
		if rd.asked {
			if rd.decide(i); rd.st[i] != stQueued {
				continue
			}
		}
		rd.open(i)
	}
}

// open asks the user about call i: approval.requested, with the call's
// row waiting.
func (rd *round) open(i int) {
	r, u, v := rd.r, rd.uses[i], rd.verdict[i]
	p := r.t.Permissions
	rules := permission.SessionRules(rd.call[i])
	var targets []string
	if rd.call[i].Targeter != nil {
		targets, _ = rd.call[i].Targeter.Targets(u.Input)
	}
	id, expires, err := p.Open(Approval{ToolUseID: u.ID, ToolName: u.Name, MessageID: rd.c.msg.ID, Input: inputOrEmpty(u.Input),
		Call: rd.call[i], Verdict: v, Targets: targets, SessionRules: rules}, rd.answers)
	if err != nil {
		rd.fail(i, "permission denied: the user could not be asked: "+err.Error())
		return
	}
	row := r.tools[u.ID]
	row.Status, row.ApprovalID, row.UpdatedAt = store.ToolAwaitingApproval, id, time.Now()
	r.emit(event.ApprovalRequested, event.ActorAgent, protocol.ApprovalRequestedPayload{ApprovalID: id, ToolUseID: u.ID,
		ToolName: u.Name, Input: inputOrEmpty(u.Input), MessageID: rd.c.msg.ID, Kind: string(rd.call[i].Kind), Targets: targets,
		Reason: v.Reason, Rule: v.Rule, Mode: string(p.Mode()), SessionRules: rules,
		ExpiresAt: expires.UTC().Format(time.RFC3339Nano)}, store.PutToolCall{Call: *row})
	if r.emitErr != nil {
		p.Settle(id, protocol.ApprovalResolution{Decision: protocol.DecisionDeny, Reason: protocol.ApprovalReasonCancelled})
		p.Close(id)
		rd.st[i] = stHeld
		return
	}
	rd.st[i], rd.approval[i] = stAsking, id
	rd.asking++
	rd.asked = true
}

// answered applies the resolution of an open request: approval.resolved,
// then the call is ready to start, or fails with permission_denied.
func (rd *round) answered(a Answer) {
	i := slices.Index(rd.approval, a.ID)
	if i < 0 || rd.st[i] != stAsking {
		return // resolved already (a cancel settled it first)
	}
	rd.resolved(i, a.Res)
	if rd.r.emitErr != nil || rd.r.ctx.Err() != nil {
		return // the loop winds the round down
	}
	if a.Res.Decision == protocol.DecisionAllow {
		rd.st[i] = stReady
	} else {
		rd.fail(i, refusedMessage(a.Res, rd.r.cfg.ApprovalTimeout))
	}
	rd.openQueued()
}

// resolved emits approval.resolved for call i's request, with the row's
// approval (and, for an allow with scope session, the rules it adds),
// and closes the request.
func (rd *round) resolved(i int, res protocol.ApprovalResolution) {
	r, u := rd.r, rd.uses[i]
	p := r.t.Permissions
	id := rd.approval[i]
	rd.st[i] = stHeld
	rd.asking--
	row := r.tools[u.ID]
	row.Status, row.UpdatedAt = store.ToolPending, time.Now()
	row.Approval = &store.Approval{Decision: res.Decision, Reason: res.Reason, Scope: res.Scope, Message: res.Message,
		SessionRules: res.SessionRules, ReleasedBy: res.ReleasedBy}
	ops := []store.Op{store.PutToolCall{Call: *row}}
	if res.Decision == protocol.DecisionAllow && res.ReleasedBy == "" && len(res.SessionRules) > 0 {
		ops = append(ops, store.UpdateSession{ID: p.RulesSession(), AddRules: res.SessionRules})
	}
	actor := event.ActorUser
	if res.Reason != protocol.ApprovalReasonUser {
		actor = event.ActorSession
	}
	r.emit(event.ApprovalResolved, actor, protocol.ApprovalResolvedPayload{ApprovalID: id, ToolUseID: u.ID, Decision: res.Decision,
		Reason: res.Reason, ToolName: u.Name, Scope: res.Scope, Message: res.Message, SessionRules: res.SessionRules,
		ReleasedBy: res.ReleasedBy}, ops...)
	p.Close(id)
}

// cancelRequests denies the open requests of the round (reason
// cancelled), in order; an answer that won first stands.
func (rd *round) cancelRequests() {
	p := rd.r.t.Permissions
	for i := range rd.uses {
		if rd.st[i] != stAsking || rd.r.emitErr != nil {
			continue
		}
		res := p.Settle(rd.approval[i], protocol.ApprovalResolution{Decision: protocol.DecisionDeny, Reason: protocol.ApprovalReasonCancelled})
		rd.resolved(i, res)
	}
}

// abandon closes the open requests without events (the turn stops on a
// lost event; their rows are marked failed with the turn's end).
func (rd *round) abandon() {
	p := rd.r.t.Permissions
	for i := range rd.uses {
		if rd.st[i] == stAsking {
			p.Settle(rd.approval[i], protocol.ApprovalResolution{Decision: protocol.DecisionDeny, Reason: protocol.ApprovalReasonCancelled})
			p.Close(rd.approval[i])
			rd.st[i] = stHeld
			rd.asking--
		}
	}
}

// nextReady returns the first call ready to start, in the message's
// order, or -1.
func (rd *round) nextReady() int {
	return slices.Index(rd.st, stReady)
}

func inputOrEmpty(in json.RawMessage) json.RawMessage {
	if len(in) == 0 {
		return json.RawMessage("{}")
	}
	return in
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
			DurationMS: dur, Via: d.res.Via, ExitCode: d.res.ExitCode, fileChange: changeOf(d.res.Change), toolOutput: outputOf(d.res)}, event.ToolCompleted, row, block)
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
	env := tool.Env{Root: r.t.Root, Workspace: r.t.Workspace, SessionID: r.t.SessionID, TurnID: r.t.ID, ToolUseID: u.ID, Editor: r.cfg.Editor,
		Output: r.outputSink(c.msg.ID, u.ID)}
	return safeRun(ctx, t, env, u)
}

// outputSink returns what streams a running call's live output as
// tool.output_delta events. It runs on the call's goroutine and emits
// straight to the session's emitter (safe for concurrent use); the tool
// returns only after its last delta was emitted, so every delta's id is
// below the call's tool.completed or tool.failed. A delta the bus
// refuses is dropped: it is a view of the output, the result keeps it.
func (r *run) outputSink(msgID, toolUseID string) func(tool.OutputChunk) {
	return func(c tool.OutputChunk) {
		_, err := r.t.Emitter.Emit(bus.Spec{Type: event.ToolOutputDelta, TurnID: r.t.ID, Actor: event.ActorTool,
			Payload: protocol.ToolOutputDeltaPayload{MessageID: msgID, ToolUseID: toolUseID, Stream: c.Stream, Data: c.Data,
				Offset: c.Offset, Capped: c.Capped}})
		if err != nil {
			r.cfg.Logger.Debug("live output dropped", "session", r.t.SessionID, "tool_use_id", toolUseID, "err", err)
		}
	}
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
