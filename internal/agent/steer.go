package agent

import (
	"encoding/json"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Steered is a user message sent into a running turn (docs/conversation.md,
// "Follow-ups: queue and steer"): Ops are stored with it (its images).
type Steered struct {
	Message message.Message
	Ops     []store.Op
}

// takeSteered appends the messages steered into the turn since the last
// model call to the conversation, before the next call: each is stored
// with a turn.steered that says where it entered (after which message,
// before which call).
func (r *run) takeSteered() {
	if r.t.Steer == nil {
		return
	}
	for _, s := range r.t.Steer() {
		after := ""
		if n := len(r.conv); n > 0 {
			after = r.conv[n-1].ID
		}
		s.Message.TurnID = r.t.ID
		raw, err := json.Marshal(s.Message)
		if err != nil {
			r.emitErr = err
			return
		}
		r.emit(event.TurnSteered, event.ActorUser, protocol.TurnSteeredPayload{UserMessage: raw, AfterMessageID: after, CallIndex: r.calls},
			append(s.Ops, store.PutMessage{Message: s.Message})...)
		if r.emitErr != nil {
			return
		}
		r.conv = append(r.conv, s.Message)
	}
}
