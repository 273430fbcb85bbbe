package hub

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// The message in flight. A snapshot taken while an assistant message
// streams carries it in messages, with status streaming and its content
// so far; the deltas after the seam continue it exactly (contract §11).
// It is not stored before its model call ends, so the hub builds it
// from what it already keeps: each session's model call in flight (the
// last llm.call_started not yet followed by llm.call_completed or
// llm.call_failed, as of the last delivered event) and the streaming
// events of that call its ring still holds.
//
// When the ring no longer holds the call's first streaming events (the
// per-session bound or the global byte cap let them go, or this process
// started holding the session after the call began), the message is
// still sent, with what is held, marked start_missing: a client shows
// it as incomplete instead of showing a truncated answer as whole.

// openCall is a session's model call in flight.
type openCall struct {
	startedID string // the id of its llm.call_started
	messageID string // of the assistant message it produces
	model     string
	turnID    string
	ts        time.Time // when it started: the message's created_at
}

// callOf returns the call an llm.call_started event opens.
func callOf(ev *event.Event) *openCall {
	var p protocol.LLMCallStartedPayload
	_ = ev.DecodePayload(&p) // a payload without a message id yields none
	return &openCall{startedID: ev.ID, messageID: p.MessageID, model: p.Model, turnID: ev.TurnID, ts: ev.TS}
}

// track follows the session's model call in flight through a delivered
// event. Called with st.mu held.
func (st *sessionState) track(ev *event.Event) {
	switch ev.Type {
	case event.LLMCallStarted:
		st.call = callOf(ev)
	case event.LLMCallCompleted, event.LLMCallFailed, event.TurnCompleted, event.TurnCancelled:
		st.call = nil
	}
}

// inflight is what a snapshot needs of the call in flight at its seam,
// taken under the session's lock with delivery held.
type inflight struct {
	sessionID string
	call      openCall
	items     []*Item // the ring's events of the session after the call started, up to the seam
	lost      bool    // a streaming event after the call started is not held
}

// inflightAt returns the call in flight as of seam, with the ring's
// events since it started; nil when no call is open. Called with st.mu
// held.
func (st *sessionState) inflightAt(sessionID, seam string) *inflight {
	if st.call == nil {
		return nil
	}
	c := *st.call
	return &inflight{sessionID: sessionID, call: c, items: st.ring.between(c.startedID, seam),
		lost: st.heldFrom > c.startedID || st.ring.lostAfter(c.startedID)}
}

// streamPayload holds the fields of every streaming payload the message
// is built from.
type streamPayload struct {
	MessageID    string          `json:"message_id"`
	Index        int             `json:"content_block_index"`
	Model        string          `json:"model"`
	Text         string          `json:"text"`
	Signature    *string         `json:"signature"`
	ToolUseID    string          `json:"tool_use_id"`
	ToolName     string          `json:"tool_name"`
	PartialJSON  string          `json:"partial_json"`
	FinalInput   json.RawMessage `json:"final_input"`
	StopReason   string          `json:"stop_reason"`
	FinalContent []message.Block `json:"final_content"`
	Usage        *message.Usage  `json:"usage"`
}

// maxBlockIndex bounds the content_block_index a message is grown to
// (the clients' bound too).
const maxBlockIndex = 4096

// message builds the message in flight from the held events: nil when
// its call has not streamed anything yet and nothing of it was lost
// (message.start then comes live). A message.complete already delivered
// (its llm.call_completed is not, so it is not stored yet) gives the
// final content and status.
func (f *inflight) message() *message.Message {
	m := &message.Message{ID: f.call.messageID, SessionID: f.sessionID, TurnID: f.call.turnID,
		Role: message.RoleAssistant, Status: protocol.StatusStreaming, Model: f.call.model, CreatedAt: f.call.ts.UTC()}
	started, seen := false, false
	var b builder
	for _, it := range f.items {
		var fr struct {
			Event struct {
				Payload streamPayload `json:"payload"`
			} `json:"event"`
		}
		if json.Unmarshal(it.Frame, &fr) != nil {
			continue
		}
		p := &fr.Event.Payload
		if m.ID == "" {
			m.ID = p.MessageID // a call announced without its message id
		}
		if p.MessageID != m.ID || m.ID == "" {
			continue
		}
		seen = true
		switch it.Type {
		case event.MessageStart:
			started = true
			if p.Model != "" {
				m.Model = p.Model
			}
		case event.MessageComplete:
			b.final = p.FinalContent
			m.Usage, m.Status = p.Usage, finalStatus(p.StopReason)
		case event.TextDelta, event.ThinkingDelta, event.ToolUseStart, event.ToolUseInputDelta, event.ToolUseEnd:
			if p.Index < 0 || p.Index >= maxBlockIndex {
				continue
			}
			b.apply(it.Type, p)
		}
	}
	if !seen && !f.lost || m.ID == "" {
		return nil
	}
	m.StartMissing = !started
	m.Content = b.content()
	return m
}

// builder folds block deltas into content blocks, as a client folds
// them; the text of each block grows in a strings.Builder, so a long
// answer costs its length, not its length squared.
type builder struct {
	blocks []partBlock
	final  []message.Block // message.complete's, when delivered: it wins
}

type partBlock struct {
	message.Block
	text, partial strings.Builder // Text or Thinking; PartialInput
}

// apply folds one block delta.
func (bl *builder) apply(typ event.Type, p *streamPayload) {
	kind := message.BlockText
	switch typ {
	case event.ThinkingDelta:
		kind = message.BlockThinking
	case event.ToolUseStart, event.ToolUseInputDelta, event.ToolUseEnd:
		kind = message.BlockToolUse
	}
	for len(bl.blocks) <= p.Index {
		// A block none of whose events are held (its start is missing)
		// stays an empty text block.
		bl.blocks = append(bl.blocks, partBlock{Block: message.Block{Type: message.BlockText}})
	}
	b := &bl.blocks[p.Index]
	if b.Type != kind && b.text.Len() == 0 && b.partial.Len() == 0 && b.ID == "" {
		b.Type = kind
	}
	switch typ {
	case event.TextDelta, event.ThinkingDelta:
		b.text.WriteString(p.Text)
		if p.Signature != nil {
			b.Signature = *p.Signature
		}
	case event.ToolUseStart:
		b.ID, b.Name = p.ToolUseID, p.ToolName
	case event.ToolUseInputDelta:
		b.partial.WriteString(p.PartialJSON)
	case event.ToolUseEnd:
		b.Input = p.FinalInput
		b.partial.Reset()
		if len(b.Input) == 0 || string(b.Input) == "null" {
			b.Input = json.RawMessage("{}")
		}
	}
}

// content returns the blocks: message.complete's final content once
// delivered, else what the deltas built (never nil).
func (bl *builder) content() []message.Block {
	if bl.final != nil {
		return bl.final
	}
	out := make([]message.Block, len(bl.blocks))
	for i := range bl.blocks {
		b := &bl.blocks[i]
		out[i] = b.Block
		switch b.Type {
		case message.BlockThinking:
			out[i].Thinking = b.text.String()
		case message.BlockToolUse:
			out[i].PartialInput = b.partial.String()
		default:
			out[i].Text = b.text.String()
		}
	}
	return out
}

// finalStatus is the status message.complete's stop reason gives.
func finalStatus(stop string) message.Status {
	switch stop {
	case "cancelled":
		return message.StatusCancelled
	case "error":
		return message.StatusFailed
	}
	return message.StatusComplete
}

// callAsOf returns the session's model call in flight as of event id
// asOf, from the store (a node that starts following a tree owned
// elsewhere): its last llm.call_* event, if that is a start.
func (h *Hub) callAsOf(ctx context.Context, sessionID, asOf string) (*openCall, error) {
	var last []byte
	err := h.store.ScanEvents(ctx, store.EventQuery{SessionIDs: []string{sessionID}, UpToID: asOf,
		Types: []event.Type{event.LLMCallStarted, event.LLMCallCompleted, event.LLMCallFailed}},
		func(r store.EventRow) error {
			last = r.Body
			return nil
		})
	if err != nil || last == nil {
		return nil, err
	}
	ev, err := event.Decode(last)
	if err != nil || ev.Type != event.LLMCallStarted {
		return nil, err
	}
	return callOf(ev), nil
}
