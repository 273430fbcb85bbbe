package streamtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/protocol"
)

// InFlight splits a snapshot's messages into the stored ones and the
// assistant message that was in flight at its seam: the last message,
// if it was committed after the seam (its anchor, see Anchors, is
// newer) or never. A snapshot holds at most one such message, always
// last.
func InFlight(t testing.TB, snap *protocol.Snapshot, anchor map[string]string) ([]json.RawMessage, *message.Message) {
	t.Helper()
	msgs := snap.Messages
	for i, raw := range msgs {
		var m message.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("snapshot message %s: %v", raw, err)
		}
		if a, ok := anchor[m.ID]; ok && a <= snap.SnapshotAtEventID {
			if m.Status == protocol.StatusStreaming || m.StartMissing {
				t.Fatalf("snapshot as of %s: stored message %s is marked in flight: %s", snap.SnapshotAtEventID, m.ID, raw)
			}
			continue
		}
		if i != len(msgs)-1 || m.Role != message.RoleAssistant {
			t.Fatalf("snapshot as of %s: message %s (committed with %q) is not stored as of the seam and is not the last assistant message",
				snap.SnapshotAtEventID, m.ID, anchor[m.ID])
		}
		return msgs[:i], &m
	}
	return msgs, nil
}

// Continue folds the streaming events of message id (taken from evs,
// the events a client received after its snapshot, in order) into
// start, the message as the snapshot carried it (nil when the snapshot
// did not hold it: message.start must then follow), the way a client
// does, up to the message's message.complete. It returns the content
// the client built and message.complete's final_content; done is false
// when no message.complete was among evs.
func Continue(t Fataler, start *message.Message, id string, evs []*protocol.EventEnvelope) (got, final []message.Block, done bool) {
	t.Helper()
	begun := start != nil
	if start != nil {
		got = slices.Clone(start.Content)
	}
	for _, e := range evs {
		var p struct {
			MessageID    string          `json:"message_id"`
			Index        int             `json:"content_block_index"`
			Text         string          `json:"text"`
			Signature    *string         `json:"signature"`
			ToolUseID    string          `json:"tool_use_id"`
			ToolName     string          `json:"tool_name"`
			PartialJSON  string          `json:"partial_json"`
			FinalInput   json.RawMessage `json:"final_input"`
			FinalContent []message.Block `json:"final_content"`
		}
		switch protocol.EventType(e.Type) {
		case protocol.EventMessageStart, protocol.EventTextDelta, protocol.EventThinkingDelta, protocol.EventToolUseStart,
			protocol.EventToolUseInputDelta, protocol.EventToolUseEnd, protocol.EventMessageComplete:
		default:
			continue
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatalf("%s payload %s: %v", e.Type, e.Payload, err)
		}
		if p.MessageID != id {
			continue
		}
		typ := protocol.EventType(e.Type)
		switch typ {
		case protocol.EventMessageStart:
			if begun {
				t.Fatalf("message.start %s of message %s after the snapshot held the message (or twice)", e.ID, id)
			}
			begun = true
			continue
		case protocol.EventMessageComplete:
			return got, p.FinalContent, true
		}
		if !begun {
			t.Fatalf("%s %s of message %s before its message.start, and the snapshot did not hold it", e.Type, e.ID, id)
		}
		for len(got) <= p.Index {
			got = append(got, message.Block{})
		}
		b := &got[p.Index]
		switch typ {
		case protocol.EventTextDelta:
			b.Type = protocol.BlockText
			b.Text += p.Text
		case protocol.EventThinkingDelta:
			b.Type = protocol.BlockThinking
			b.Thinking += p.Text
			if p.Signature != nil {
				b.Signature = *p.Signature
			}
		case protocol.EventToolUseStart:
			b.Type, b.ID, b.Name = protocol.BlockToolUse, p.ToolUseID, p.ToolName
		case protocol.EventToolUseInputDelta:
			b.PartialInput += p.PartialJSON
		case protocol.EventToolUseEnd:
			b.Input, b.PartialInput = p.FinalInput, ""
		}
	}
	return got, nil, false
}

// Fataler is what Continue needs of a test: *testing.T and *rapid.T
// both have it.
type Fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// SameContent reports how got differs from want, block by block, as
// their canonical JSON (tool inputs compared as JSON values); "" when
// they are the same.
func SameContent(got, want []message.Block) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d blocks, want %d:\n got  %s\n want %s", len(got), len(want), blocksJSON(got), blocksJSON(want))
	}
	for i := range got {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if !JSONEqual(g, w) {
			return fmt.Sprintf("block %d:\n got  %s\n want %s", i, g, w)
		}
	}
	return ""
}

func blocksJSON(bs []message.Block) string {
	b, _ := json.Marshal(bs)
	return string(b)
}
