package acp

import (
	"context"
	"encoding/json"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// storedMessage is a canonical message as GET /sessions/{id}/messages and
// snapshots return it.
type storedMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	TurnID  string          `json:"turn_id"`
	Status  string          `json:"status"`
	Content []*client.Block `json:"content"`
}

// pageSize is the page of history read per request.
const pageSize = 100

// turnMessages reads the stored messages of turn turnID, oldest first,
// paging back from the newest until a page starts before the turn.
func (t *turn) turnMessages(ctx context.Context) ([]storedMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	var out []storedMessage
	before := ""
	for {
		page, more, err := t.a.c.Messages(ctx, t.sid, before, pageSize)
		if err != nil {
			return nil, err
		}
		ms := decodeMessages(page)
		var mine []storedMessage
		for _, m := range ms {
			if m.TurnID == t.id {
				mine = append(mine, m)
			}
		}
		out = append(mine, out...)
		if !more || len(ms) == 0 || ms[0].TurnID != t.id {
			return out, nil
		}
		before = ms[0].ID
	}
}

func decodeMessages(raw []json.RawMessage) []storedMessage {
	out := make([]storedMessage, 0, len(raw))
	for _, r := range raw {
		var m storedMessage
		if json.Unmarshal(r, &m) == nil && m.ID != "" {
			out = append(out, m)
		}
	}
	return out
}

// reconcileStored brings the editor up to the turn's stored messages
// when the turn ends: text a gap (a server restart, an evicted ring)
// kept from the stream, and tool results whose events were not seen.
func (t *turn) reconcileStored(ctx context.Context) {
	ms, err := t.turnMessages(ctx)
	if err != nil {
		t.a.log.Warn("read the turn's messages", "session", t.sid, "turn", t.id, "err", err)
		return
	}
	t.reconcileMessages(ctx, ms)
}

func (t *turn) reconcileMessages(ctx context.Context, ms []storedMessage) {
	for _, m := range ms {
		switch m.Role {
		case "assistant":
			t.reconcile(ctx, m.ID, m.Content)
		case "tool", "user":
			for _, b := range m.Content {
				if b != nil && b.Type == "tool_result" {
					t.storedResult(ctx, b.ToolUseID, b.Content, b.IsError)
				}
			}
		}
	}
}

// fromSnapshot catches up after the stream was rebuilt from a snapshot:
// the turn's committed messages are reconciled, and if the turn ended
// during the gap the prompt is answered from what the store holds.
func (t *turn) fromSnapshot(ctx context.Context, v *client.View) {
	var ms []storedMessage
	for _, m := range v.Messages {
		if m.TurnID == t.id && m.Status != "streaming" {
			ms = append(ms, storedMessage{ID: m.ID, Role: m.Role, TurnID: m.TurnID, Status: m.Status, Content: m.Blocks})
		}
	}
	t.reconcileMessages(ctx, ms)
	if v.Turn.ID == t.id && v.Turn.Status == protocol.TurnStatusInFlight {
		return
	}
	// The turn ended while the stream was down; its end event is gone
	// with the gap. The last assistant message tells how it ended.
	all, err := t.turnMessages(ctx)
	if err != nil {
		t.a.log.Warn("read the turn's messages", "session", t.sid, "turn", t.id, "err", err)
	}
	t.reconcileMessages(ctx, all)
	p := turnEndPayload{Outcome: "completed", StopReason: "end_turn"}
	typ := protocol.EventTurnCompleted
	last := -1
	for i, m := range all {
		if m.Role == string(protocol.RoleAssistant) {
			last = i
		}
	}
	if last >= 0 {
		switch all[last].Status {
		case "cancelled":
			typ = protocol.EventTurnCancelled
		case "failed":
			p.Outcome = "failed"
		}
	}
	t.finish(typ, p)
}
