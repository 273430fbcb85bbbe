package client

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// applyFollowUp folds turn.queued (the turn joins View.Queued) and
// turn.steered (its user message joins the running turn's messages).
func (v *View) applyFollowUp(ev *protocol.EventEnvelope, turnID string) error {
	var p struct {
		UserMessage struct {
			ID      string   `json:"id"`
			Content []*Block `json:"content"`
		} `json:"user_message"`
		Source string `json:"source"`
	}
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return err
	}
	u := p.UserMessage
	if protocol.EventType(ev.Type) == protocol.EventTurnSteered {
		v.addMessage(&Message{ID: u.ID, Role: string(protocol.RoleUser), SessionID: ev.SessionID, TurnID: turnID, Blocks: nonNil(u.Content), Status: "complete"})
		return nil
	}
	if slices.ContainsFunc(v.Queued, func(q protocol.QueuedTurn) bool { return q.TurnID == turnID }) {
		return nil
	}
	q := protocol.QueuedTurn{TurnID: turnID, MessageID: u.ID, Source: p.Source}
	var text []string
	for _, b := range u.Content {
		switch b.Type {
		case protocol.BlockText:
			text = append(text, b.Text)
		case protocol.BlockImage:
			q.Images++
		}
	}
	q.Preview = preview(strings.Join(text, ""))
	if t, err := time.Parse(time.RFC3339Nano, ev.TS); err == nil {
		q.QueuedAt = t
	}
	v.Queued = append(v.Queued, q)
	return nil
}

// dequeue takes a turn out of View.Queued.
func (v *View) dequeue(turnID string) {
	v.Queued = slices.DeleteFunc(v.Queued, func(q protocol.QueuedTurn) bool { return q.TurnID == turnID })
	if len(v.Queued) == 0 {
		v.Queued = nil
	}
}

// preview is a queued message's text as a summary lists it (close
// enough to the server's title rule): white space collapsed, cut at 80
// characters.
func preview(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		return string(r[:79]) + "…"
	}
	return s
}
