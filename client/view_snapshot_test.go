package client_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// streamed is a drawn assistant message: its events from message.start
// to message.complete, and what a server's snapshot holds of it after
// each prefix of them (status streaming, content so far, tool input so
// far as partial_input).
type streamed struct {
	events []*protocol.EventEnvelope
	final  []map[string]any
}

func drawStreamed(t *rapid.T, msgID string) streamed {
	var s streamed
	n := 0
	add := func(typ protocol.EventType, p map[string]any) {
		n++
		p["message_id"] = msgID
		b, _ := json.Marshal(p)
		turn := "turn_1"
		s.events = append(s.events, &protocol.EventEnvelope{ID: fmt.Sprintf("evt_%04d", n), Type: string(typ), SessionID: "sess_1",
			TurnID: &turn, Actor: "model", Payload: b})
	}
	add(protocol.EventMessageStart, map[string]any{"role": "assistant", "model": "m"})
	pieces := func(str, label string) []string {
		var out []string
		for r := []rune(str); len(r) > 0; {
			k := rapid.IntRange(1, len(r)).Draw(t, label)
			out = append(out, string(r[:k]))
			r = r[k:]
		}
		return out
	}
	for i := range rapid.IntRange(0, 3).Draw(t, "blocks") {
		switch rapid.SampledFrom([]string{"text", "thinking", "tool_use"}).Draw(t, "kind") {
		case "text":
			str := rapid.StringMatching(`[a-z .]{1,30}`).Draw(t, "text")
			for _, p := range pieces(str, "cut") {
				add(protocol.EventTextDelta, map[string]any{"content_block_index": i, "text": p})
			}
			s.final = append(s.final, map[string]any{"type": "text", "text": str})
		case "thinking":
			str := rapid.StringMatching(`[a-z ]{1,30}`).Draw(t, "thinking")
			ps := pieces(str, "cut")
			for j, p := range ps {
				d := map[string]any{"content_block_index": i, "text": p, "signature": nil}
				if j == len(ps)-1 {
					d["signature"] = "sig"
				}
				add(protocol.EventThinkingDelta, d)
			}
			s.final = append(s.final, map[string]any{"type": "thinking", "thinking": str, "signature": "sig"})
		case "tool_use":
			id := fmt.Sprintf("tu_%d", i)
			in := rapid.MapOfN(rapid.StringMatching(`[a-z]{1,4}`), rapid.StringMatching(`[a-z{}" ]{0,8}`), 0, 3).Draw(t, "input")
			raw, _ := json.Marshal(in)
			add(protocol.EventToolUseStart, map[string]any{"content_block_index": i, "tool_use_id": id, "tool_name": "read_file"})
			for _, p := range pieces(string(raw), "cut") {
				add(protocol.EventToolUseInputDelta, map[string]any{"content_block_index": i, "tool_use_id": id, "partial_json": p})
			}
			add(protocol.EventToolUseEnd, map[string]any{"content_block_index": i, "tool_use_id": id, "final_input": json.RawMessage(raw)})
			s.final = append(s.final, map[string]any{"type": "tool_use", "id": id, "name": "read_file", "input": json.RawMessage(raw)})
		}
	}
	if s.final == nil {
		s.final = []map[string]any{}
	}
	add(protocol.EventMessageComplete, map[string]any{"stop_reason": "end_turn", "final_content": s.final,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 2, "cost_usd": 0}})
	return s
}

// snapshotAfter is the server's snapshot of the message after the first
// k events (message.start included): the canonical blocks so far, a
// tool_use block's input {} with the fragments so far as partial_input.
func (s streamed) snapshotAfter(t *rapid.T, k int) json.RawMessage {
	var blocks []map[string]any
	for _, e := range s.events[1:k] {
		var p struct {
			Index       int             `json:"content_block_index"`
			Text        string          `json:"text"`
			Signature   *string         `json:"signature"`
			ToolUseID   string          `json:"tool_use_id"`
			PartialJSON string          `json:"partial_json"`
			FinalInput  json.RawMessage `json:"final_input"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		for len(blocks) <= p.Index {
			blocks = append(blocks, map[string]any{})
		}
		b := blocks[p.Index]
		switch protocol.EventType(e.Type) {
		case protocol.EventTextDelta:
			b["type"] = "text"
			b["text"], _ = b["text"].(string)
			b["text"] = b["text"].(string) + p.Text
		case protocol.EventThinkingDelta:
			b["type"] = "thinking"
			b["thinking"], _ = b["thinking"].(string)
			b["thinking"] = b["thinking"].(string) + p.Text
			b["signature"] = p.Signature
		case protocol.EventToolUseStart:
			b["type"], b["id"], b["name"], b["input"] = "tool_use", p.ToolUseID, "read_file", map[string]any{}
		case protocol.EventToolUseInputDelta:
			b["partial_input"], _ = b["partial_input"].(string)
			b["partial_input"] = b["partial_input"].(string) + p.PartialJSON
		case protocol.EventToolUseEnd:
			b["input"] = p.FinalInput
			delete(b, "partial_input")
		}
	}
	if blocks == nil {
		blocks = []map[string]any{}
	}
	raw, _ := json.Marshal(map[string]any{"id": "msg_1", "session_id": "sess_1", "turn_id": "turn_1", "role": "assistant",
		"status": protocol.StatusStreaming, "model": "m", "content": blocks, "created_at": "2026-01-01T00:00:00Z"})
	return raw
}

// TestViewContinuesAStreamingMessageFromASnapshot: a view built from a
// snapshot taken after any prefix of a streamed message (its content so
// far, status streaming), then the rest of the stream, ends exactly
// where a view that followed the whole stream live ends, with no delta
// mismatch; while it streams, the message shows the content so far.
func TestViewContinuesAStreamingMessageFromASnapshot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := drawStreamed(rt, "msg_1")
		k := rapid.IntRange(1, len(s.events)-1).Draw(rt, "attachAfter")
		turn := "turn_1"
		session := json.RawMessage(fmt.Sprintf(`{"id":"sess_1","current_turn_id":%q,"current_turn_status":"in_flight"}`, turn))

		live := client.NewView(nil)
		live.ApplySnapshot(&protocol.Snapshot{Session: session, Messages: []json.RawMessage{}})
		mid := client.NewView(nil)
		mid.ApplySnapshot(&protocol.Snapshot{Session: session, Messages: []json.RawMessage{s.snapshotAfter(rt, k)},
			SnapshotAtEventID: s.events[k-1].ID})
		if m := mid.Message("msg_1"); m == nil || m.Status != string(protocol.StatusStreaming) {
			rt.Fatalf("the snapshot's streaming message in the view: %+v", m)
		}
		for i, e := range s.events {
			live.Apply(e)
			mid.Apply(e) // at or before the seam: ignored
			if i == len(s.events)-2 {
				a, b := messageJSON(live, "msg_1"), messageJSON(mid, "msg_1")
				if a != b {
					rt.Fatalf("before message.complete:\n live %s\n mid  %s", a, b)
				}
			}
		}
		a, b := messageJSON(live, "msg_1"), messageJSON(mid, "msg_1")
		if a != b || mid.Mismatches != 0 || live.Mismatches != 0 {
			rt.Fatalf("after message.complete (mismatches %d, %d):\n live %s\n mid  %s", live.Mismatches, mid.Mismatches, a, b)
		}
	})
}

// messageJSON is a view's message as JSON, no blocks and an empty list
// alike.
func messageJSON(v *client.View, id string) string {
	m := *v.Message(id)
	if m.Blocks == nil {
		m.Blocks = []*client.Block{}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestViewStartMissing: a streaming message the snapshot flags
// start_missing keeps the flag (for rendering) until message.complete
// replaces it, and its final content is not counted as a mismatch.
func TestViewStartMissing(t *testing.T) {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{Session: json.RawMessage(`{"id":"sess_1","current_turn_id":"t1"}`),
		Messages:          []json.RawMessage{json.RawMessage(`{"id":"m1","role":"assistant","turn_id":"t1","status":"streaming","start_missing":true,"content":[{"type":"text","text":"60 of 400."}]}`)},
		SnapshotAtEventID: "evt_1"})
	m := v.Message("m1")
	if m == nil || !m.StartMissing || m.Text() != "60 of 400." {
		t.Fatalf("message %+v", m)
	}
	turn := "t1"
	v.Apply(&protocol.EventEnvelope{ID: "evt_2", Type: "text.delta", TurnID: &turn, Payload: json.RawMessage(`{"message_id":"m1","content_block_index":0,"text":" Sentence 61"}`)})
	if !strings.HasSuffix(v.Message("m1").Text(), "Sentence 61") || !v.Message("m1").StartMissing {
		t.Fatalf("after a delta: %+v", v.Message("m1"))
	}
	v.Apply(&protocol.EventEnvelope{ID: "evt_3", Type: "message.complete", TurnID: &turn,
		Payload: json.RawMessage(`{"message_id":"m1","stop_reason":"end_turn","final_content":[{"type":"text","text":"Sentence 1 … Sentence 61"}]}`)})
	if m := v.Message("m1"); m.StartMissing || m.Status != "complete" || m.Text() != "Sentence 1 … Sentence 61" || v.Mismatches != 0 {
		t.Fatalf("after message.complete: %+v, %d mismatches", m, v.Mismatches)
	}
}
