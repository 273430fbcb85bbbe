package client

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/metis-agent/metis/protocol"
)

// Apply folds one event into the view and reports whether its type was
// known. Unknown types are skipped with a debug log (spec §9.2); events
// at or before LastEventID are ignored (a replay overlap never doubles
// text). Deltas build messages incrementally; message.complete replaces
// the message with its final_content, which is authoritative.
func (v *View) Apply(ev *protocol.EventEnvelope) bool {
	if ev.ID != "" && ev.ID <= v.LastEventID {
		return true
	}
	if !protocol.KnownEvent(protocol.EventType(ev.Type)) {
		v.Skipped++
		v.log.Debug("skipping an event of unknown type", "type", ev.Type, "id", ev.ID)
		v.LastEventID = max(v.LastEventID, ev.ID)
		return false
	}
	if err := v.apply(ev); err != nil {
		v.log.Debug("event not applied", "type", ev.Type, "id", ev.ID, "err", err)
	}
	v.LastEventID = max(v.LastEventID, ev.ID)
	return true
}

type deltaPayload struct {
	MessageID   string          `json:"message_id"`
	Index       int             `json:"content_block_index"`
	Text        string          `json:"text"`
	Signature   *string         `json:"signature"`
	ToolUseID   string          `json:"tool_use_id"`
	ToolName    string          `json:"tool_name"`
	PartialJSON string          `json:"partial_json"`
	FinalInput  json.RawMessage `json:"final_input"`
	Role        string          `json:"role"`
	Model       string          `json:"model"`
}

func (v *View) apply(ev *protocol.EventEnvelope) error {
	turnID := ""
	if ev.TurnID != nil {
		turnID = *ev.TurnID
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventTurnStarted:
		var p struct {
			UserMessage struct {
				ID      string   `json:"id"`
				Role    string   `json:"role"`
				Content []*Block `json:"content"`
				Status  string   `json:"status"`
			} `json:"user_message"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		v.Turn = Turn{ID: turnID, Status: protocol.TurnStatusInFlight}
		v.dequeue(turnID)
		u := p.UserMessage
		v.addMessage(&Message{ID: u.ID, Role: string(protocol.RoleUser), SessionID: ev.SessionID, TurnID: turnID, Blocks: nonNil(u.Content), Status: "complete"})
	case protocol.EventTurnCompleted:
		var p struct {
			Outcome    string `json:"outcome"`
			ErrorClass string `json:"error_class"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		st := "completed"
		if p.Outcome == "failed" {
			st = "failed"
		}
		v.Turn = Turn{ID: turnID, Status: st, Reason: p.ErrorClass}
	case protocol.EventTurnCancelled:
		var p struct {
			Reason string `json:"reason"`
			Phase  string `json:"phase"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		if p.Phase == protocol.TurnPhaseQueued {
			v.dequeue(turnID) // it never ran: the turn in flight is another's
			break
		}
		v.Turn = Turn{ID: turnID, Status: "cancelled", Reason: p.Reason}
		for _, m := range v.Messages {
			if m.TurnID == turnID && m.Status == "streaming" {
				m.Status = "cancelled"
			}
		}
	case protocol.EventMessageStart:
		var p deltaPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		role := p.Role
		if role == "" {
			role = string(protocol.RoleAssistant)
		}
		v.addMessage(&Message{ID: p.MessageID, Role: role, SessionID: ev.SessionID, TurnID: turnID, Model: p.Model, Status: "streaming"})
	case protocol.EventTextDelta, protocol.EventThinkingDelta, protocol.EventToolUseStart, protocol.EventToolUseInputDelta, protocol.EventToolUseEnd:
		var p deltaPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		if p.Index < 0 || p.Index >= maxBlockIndex {
			// The view grows a message's blocks up to the index.
			return fmt.Errorf("content_block_index %d out of range", p.Index)
		}
		m := v.index[p.MessageID]
		if m == nil { // a delta whose message.start was missed (streaming gap)
			m = &Message{ID: p.MessageID, Role: string(protocol.RoleAssistant), SessionID: ev.SessionID, TurnID: turnID, Status: "streaming"}
			v.addMessage(m)
		}
		switch protocol.EventType(ev.Type) {
		case protocol.EventTextDelta:
			m.block(p.Index, protocol.BlockText).Text += p.Text
		case protocol.EventThinkingDelta:
			b := m.block(p.Index, protocol.BlockThinking)
			b.Thinking += p.Text
			if p.Signature != nil {
				b.Signature = *p.Signature
			}
		case protocol.EventToolUseStart:
			b := m.block(p.Index, protocol.BlockToolUse)
			b.ID, b.Name = p.ToolUseID, p.ToolName
			v.Tools[p.ToolUseID] = &ToolCall{ID: p.ToolUseID, Name: p.ToolName, Status: "pending"}
		case protocol.EventToolUseInputDelta:
			m.block(p.Index, protocol.BlockToolUse).PartialInput += p.PartialJSON
		case protocol.EventToolUseEnd:
			b := m.block(p.Index, protocol.BlockToolUse)
			b.Input, b.PartialInput = p.FinalInput, ""
			if tc := v.Tools[p.ToolUseID]; tc != nil {
				tc.Input = p.FinalInput
			}
		}
	case protocol.EventMessageComplete:
		var p struct {
			MessageID    string   `json:"message_id"`
			StopReason   string   `json:"stop_reason"`
			FinalContent []*Block `json:"final_content"`
			Usage        *Usage   `json:"usage"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		p.FinalContent = nonNil(p.FinalContent)
		m := v.index[p.MessageID]
		if m == nil {
			m = &Message{ID: p.MessageID, Role: string(protocol.RoleAssistant), SessionID: ev.SessionID, TurnID: turnID}
			v.addMessage(m)
		}
		if !m.StartMissing && !sameContent(m.Blocks, p.FinalContent) {
			v.Mismatches++
		}
		m.Blocks, m.StopReason, m.Usage, m.StartMissing = p.FinalContent, p.StopReason, p.Usage, false
		switch p.StopReason {
		case "cancelled":
			m.Status = "cancelled"
		case "error":
			m.Status = "failed"
		default:
			m.Status = "complete"
		}
		for _, b := range p.FinalContent {
			if b.Type == protocol.BlockToolUse {
				if tc := v.Tools[b.ID]; tc != nil {
					tc.Input = b.Input
				} else {
					v.Tools[b.ID] = &ToolCall{ID: b.ID, Name: b.Name, Input: b.Input, Status: "pending"}
				}
			}
		}
	case protocol.EventLLMCallCompleted, protocol.EventLLMCallFailed:
		var p struct {
			MessageID  string `json:"message_id"`
			ErrorClass string `json:"error_class"`
			Message    string `json:"message"`
			Usage      Usage  `json:"usage"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		v.CostUSD = addCost(v.CostUSD, p.Usage.CostUSD)
		if protocol.EventType(ev.Type) == protocol.EventLLMCallFailed && p.ErrorClass != "cancelled" {
			v.Errors = append(v.Errors, fmt.Sprintf("%s: %s", p.ErrorClass, p.Message))
			if m := v.index[p.MessageID]; m != nil && m.Status == "streaming" {
				m.Status = "failed"
			}
		}
	case protocol.EventToolCalled, protocol.EventToolCompleted, protocol.EventToolFailed:
		var p struct {
			ToolUseID  string          `json:"tool_use_id"`
			ToolName   string          `json:"tool_name"`
			Input      json.RawMessage `json:"input"`
			Summary    string          `json:"summary"`
			Result     string          `json:"result"`
			ErrorClass string          `json:"error_class"`
			Message    string          `json:"message"`
			ExitCode   *int            `json:"exit_code"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		tc := v.Tools[p.ToolUseID]
		if tc == nil {
			tc = &ToolCall{ID: p.ToolUseID, Name: p.ToolName}
			v.Tools[p.ToolUseID] = tc
		}
		switch protocol.EventType(ev.Type) {
		case protocol.EventToolCalled:
			tc.Status = "running"
			if len(p.Input) > 0 {
				tc.Input = p.Input
			}
		case protocol.EventToolCompleted:
			tc.Status, tc.Summary, tc.Result = "completed", p.Summary, p.Result
			if p.ExitCode != nil {
				tc.ExitCode = p.ExitCode
			}
		case protocol.EventToolFailed:
			tc.Status, tc.ErrorClass, tc.Error = "failed", p.ErrorClass, p.Message
			if p.ErrorClass == "cancelled" {
				tc.Status = "cancelled"
			}
		}
	case protocol.EventDelegateStarted, protocol.EventDelegateCompleted, protocol.EventDelegateFailed:
		var p struct {
			WorkerSessionID string  `json:"worker_session_id"`
			Task            string  `json:"task"`
			Model           string  `json:"model"`
			Summary         string  `json:"summary"`
			FailureMode     string  `json:"failure_mode"`
			CostUSD         float64 `json:"cost_usd"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		w := v.Workers[p.WorkerSessionID]
		if w == nil {
			w = &Worker{SessionID: p.WorkerSessionID}
			v.Workers[p.WorkerSessionID] = w
		}
		switch protocol.EventType(ev.Type) {
		case protocol.EventDelegateStarted:
			w.Task, w.Model, w.Status = p.Task, p.Model, "running"
		case protocol.EventDelegateCompleted:
			w.Status, w.Summary, w.CostUSD = "completed", p.Summary, p.CostUSD
		case protocol.EventDelegateFailed:
			w.Status, w.FailureMode, w.CostUSD = "failed", p.FailureMode, p.CostUSD
		}
	case protocol.EventApprovalRequested, protocol.EventApprovalResolved, protocol.EventSessionModeChanged:
		return v.applyApproval(ev, turnID)
	case protocol.EventTurnQueued, protocol.EventTurnSteered:
		return v.applyFollowUp(ev, turnID) // queue.go
	case protocol.EventSessionUpdated:
		return v.applySessionEdit(ev) // summary.go
	case protocol.EventToolBackgroundStarted, protocol.EventToolBackgroundExited:
		return v.applyBackground(ev)
	case protocol.EventFeedbackSubmitted:
		var p struct {
			Rating string `json:"rating"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		if v.Feedback == nil {
			v.Feedback = map[string]string{}
		}
		v.Feedback[turnID] = p.Rating
	}
	return nil
}

// addCost adds a call's cost to a total, saturating at ±MaxFloat64:
// JSON has no infinity, and the view must stay encodable (Clone) whatever
// costs a server reports.
func addCost(total, c float64) float64 {
	s := total + c
	if math.IsInf(s, 0) {
		s = math.Copysign(math.MaxFloat64, s)
	}
	return s
}

// sameContent compares streamed blocks with final_content: text,
// thinking and tool inputs (as parsed JSON).
func sameContent(got, final []*Block) bool {
	if len(got) != len(final) {
		return false
	}
	for i, g := range got {
		f := final[i]
		if g.Type != f.Type || g.Text != f.Text || g.Thinking != f.Thinking || g.ID != f.ID {
			return false
		}
		if g.Type == protocol.BlockToolUse && !jsonEqual(g.Input, f.Input) {
			return false
		}
	}
	return true
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
