package streamtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

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

// CheckContinues checks the snapshot property (contract §11) on a
// client that just read snap: it reads events up to the message.complete
// of the assistant message in flight at the snapshot's seam (the
// snapshot's message with status streaming), or, when none was, of the
// first message that starts after it, and checks that the snapshot's
// content followed by the deltas is exactly the final content (a
// message flagged start_missing is only checked to be the one that
// completes). It returns whether the snapshot held a message in flight.
func CheckContinues(t Fataler, c Conn, timeout time.Duration, snap *protocol.Snapshot) bool {
	t.Helper()
	var m *message.Message
	for _, raw := range snap.Messages {
		var x message.Message
		if err := json.Unmarshal(raw, &x); err != nil {
			t.Fatalf("snapshot message %s: %v", raw, err)
		}
		if x.Status == protocol.StatusStreaming {
			if m != nil {
				t.Fatalf("snapshot as of %s holds two messages in flight: %s and %s", snap.SnapshotAtEventID, m.ID, x.ID)
			}
			m = &x
		} else if x.StartMissing {
			t.Fatalf("snapshot as of %s: message %s flagged start_missing with status %s", snap.SnapshotAtEventID, x.ID, x.Status)
		}
	}
	id := ""
	if m != nil {
		id = m.ID
	}
	var evs []*protocol.EventEnvelope
	for {
		f, err := c.TryRead(timeout)
		if err != nil {
			t.Fatalf("snapshot as of %s: the stream ended before message %q completed: %v", snap.SnapshotAtEventID, id, err)
		}
		if f.Event == nil {
			continue // pings
		}
		e := f.Event
		if e.ID <= snap.SnapshotAtEventID {
			t.Fatalf("event %s at or before the snapshot's seam %s", e.ID, snap.SnapshotAtEventID)
		}
		evs = append(evs, e)
		var p struct {
			MessageID string `json:"message_id"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		if id == "" && e.Type == string(protocol.EventMessageStart) {
			id = p.MessageID
		}
		if id != "" && e.Type == string(protocol.EventMessageComplete) && p.MessageID == id {
			break
		}
	}
	got, final, _ := Continue(t, m, id, evs)
	if m != nil && m.StartMissing {
		return true
	}
	if d := SameContent(got, final); d != "" {
		t.Fatalf("snapshot as of %s (message %s in flight: %v): its content and the deltas after the seam are not the final content: %s",
			snap.SnapshotAtEventID, id, m != nil, d)
	}
	return m != nil
}
