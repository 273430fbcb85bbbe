package hub_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// spec is one event of a drawn model call, ready to emit.
type spec struct {
	typ     event.Type
	actor   string
	payload any
	ops     []store.Op
}

// drawnCall draws an assistant message (thinking, text and tool_use
// blocks, each streamed in random pieces) and returns the events of a
// turn that streams it: turn.started, llm.call_started, message.start,
// the deltas, message.complete, llm.call_completed (with the message
// row) and turn.completed, and the message's final content.
func drawnCall(t *rapid.T, sid, turn, msgID string) ([]spec, []message.Block) {
	var evs []spec
	add := func(typ event.Type, actor string, p any, ops ...store.Op) {
		evs = append(evs, spec{typ: typ, actor: actor, payload: p, ops: ops})
	}
	pieces := func(s, label string) []string { // cut between characters, as JSON strings are
		var out []string
		for r := []rune(s); len(r) > 0; {
			n := rapid.IntRange(1, len(r)).Draw(t, label)
			out = append(out, string(r[:n]))
			r = r[n:]
		}
		return out
	}
	user := message.Message{ID: event.NewID("msg_"), SessionID: sid, TurnID: turn, Role: message.RoleUser,
		Content: []message.Block{message.Text("go")}, Status: message.StatusComplete, CreatedAt: time.Now().UTC()}
	add(event.TurnStarted, event.ActorSession, map[string]any{"user_message": user}, store.PutMessage{Message: user})
	add(event.LLMCallStarted, event.ActorAgent, map[string]any{"message_id": msgID, "model": "test:model", "call_index": 0})
	add(event.MessageStart, event.ActorAgent, map[string]any{"message_id": msgID, "role": "assistant", "model": "test:model"})
	var final []message.Block
	for i := range rapid.IntRange(0, 4).Draw(t, "blocks") {
		base := map[string]any{"message_id": msgID, "content_block_index": i}
		with := func(kv ...any) map[string]any {
			m := map[string]any{}
			for k, v := range base {
				m[k] = v
			}
			for j := 0; j < len(kv); j += 2 {
				m[kv[j].(string)] = kv[j+1]
			}
			return m
		}
		switch rapid.SampledFrom([]string{"text", "thinking", "tool_use"}).Draw(t, "kind") {
		case "text":
			s := rapid.StringMatching(`[a-z .é]{1,40}`).Draw(t, "text")
			for _, p := range pieces(s, "textCut") {
				add(event.TextDelta, event.ActorModel, with("text", p))
			}
			final = append(final, message.Text(s))
		case "thinking":
			s := rapid.StringMatching(`[a-z ]{1,40}`).Draw(t, "thinking")
			ps := pieces(s, "thinkingCut")
			for j, p := range ps {
				var sig *string
				if j == len(ps)-1 {
					x := "sig-" + msgID
					sig = &x
				}
				add(event.ThinkingDelta, event.ActorModel, with("text", p, "signature", sig))
			}
			final = append(final, message.Block{Type: message.BlockThinking, Thinking: s, Signature: "sig-" + msgID})
		case "tool_use":
			id := fmt.Sprintf("toolu_%d", i)
			in := rapid.MapOfN(rapid.StringMatching(`[a-z]{1,5}`), rapid.StringMatching(`[a-z"{} ]{0,12}`), 0, 3).Draw(t, "input")
			raw, _ := json.Marshal(in)
			add(event.ToolUseStart, event.ActorModel, with("tool_use_id", id, "tool_name", "read_file"))
			for _, p := range pieces(string(raw), "inputCut") {
				add(event.ToolUseInputDelta, event.ActorModel, with("tool_use_id", id, "partial_json", p))
			}
			add(event.ToolUseEnd, event.ActorModel, with("tool_use_id", id, "final_input", json.RawMessage(raw)))
			final = append(final, message.Block{Type: message.BlockToolUse, ID: id, Name: "read_file", Input: raw})
		}
	}
	if final == nil {
		final = []message.Block{}
	}
	usage := message.Usage{InputTokens: 3, OutputTokens: 5}
	add(event.MessageComplete, event.ActorAgent, map[string]any{"message_id": msgID, "stop_reason": "end_turn", "final_content": final, "usage": usage})
	stored := message.Message{ID: msgID, SessionID: sid, TurnID: turn, Role: message.RoleAssistant, Content: final,
		Status: message.StatusComplete, Model: "test:model", Usage: &usage, CreatedAt: time.Now().UTC()}
	add(event.LLMCallCompleted, event.ActorAgent, map[string]any{"message_id": msgID, "model": "test:model", "stop_reason": "end_turn", "usage": usage},
		store.PutMessage{Message: stored})
	add(event.TurnCompleted, event.ActorAgent, map[string]any{"outcome": "completed"})
	return evs, final
}

// envelopes decodes items' frames into the events a client reads.
func envelopes(t tb, items []*hub.Item) []*protocol.EventEnvelope {
	t.Helper()
	out := make([]*protocol.EventEnvelope, len(items))
	for i, it := range items {
		var f struct {
			Event protocol.EventEnvelope `json:"event"`
		}
		if err := json.Unmarshal(it.Frame, &f); err != nil {
			t.Fatalf("frame %s: %v", it.Frame, err)
		}
		out[i] = &f.Event
	}
	return out
}

// snapshotMessage returns the snapshot's message with id, or nil.
func snapshotMessage(t tb, s protocol.Snapshot, id string) *message.Message {
	t.Helper()
	for _, raw := range s.Messages {
		var m message.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("snapshot message %s: %v", raw, err)
		}
		if m.ID == id {
			return &m
		}
	}
	return nil
}

// TestSnapshotMidStreamContinuesExactly is the snapshot property of
// contract §11: a client that attaches with a snapshot at any moment of
// a streamed assistant message (text, thinking, tool input) finds the
// message in the snapshot with status streaming and its content so far,
// and that content followed by the deltas after the seam is exactly
// message.complete's final content. Before the call streams, the
// message is absent (message.start comes live); once its
// message.complete is delivered but not its llm.call_completed, it is
// there with its final content and status; once stored, it is an
// ordinary stored message. The ring is drawn small sometimes: a message
// whose start it let go is flagged start_missing (and only then).
func TestSnapshotMidStreamContinuesExactly(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		ring := rapid.SampledFrom([]int{4096, 1, 3, 8}).Draw(rt, "ring")
		e := newEnv(rt, st, hub.Config{SnapshotMessages: 10, RingSize: ring, ClientQueue: 1 << 20})
		turn, msgID := event.NewID("turn_"), event.NewID("msg_")
		evs, final := drawnCall(rt, e.sid, turn, msgID)
		at := rapid.IntRange(0, len(evs)).Draw(rt, "attachAfter")
		emit := func(s spec) *event.Event {
			ev, err := e.em.Emit(bus.Spec{Type: s.typ, Actor: s.actor, TurnID: turn, Payload: s.payload, Ops: s.ops})
			if err != nil {
				rt.Fatalf("emit %s: %v", s.typ, err)
			}
			return ev
		}
		var emitted []*event.Event
		for _, s := range evs[:at] {
			emitted = append(emitted, emit(s))
		}
		e.barrier()
		att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Snapshot: true})
		for _, s := range evs[at:] {
			emit(s)
		}
		e.barrier()
		snap := decodeSnapshot(rt, att.Snapshot)
		m := snapshotMessage(rt, snap, msgID)

		// Where the attach fell.
		var began, completed, stored bool
		streamedStart := 0 // index of message.start in emitted, if emitted
		for i, ev := range emitted {
			switch ev.Type {
			case event.MessageStart:
				began, streamedStart = true, i
			case event.MessageComplete:
				completed = true
			case event.LLMCallCompleted:
				stored = true
			}
		}
		switch {
		case !began:
			if m != nil {
				rt.Fatalf("the snapshot holds the message before it began streaming: %+v", m)
			}
		case stored:
			if m == nil || m.Status != message.StatusComplete || m.StartMissing {
				rt.Fatalf("stored message in the snapshot: %+v", m)
			}
		default:
			if m == nil {
				rt.Fatalf("the message in flight is not in the snapshot (attached after %d of %d events)", at, len(evs))
			}
			want := protocol.StatusStreaming
			if completed {
				want = message.StatusComplete
			}
			if m.Status != want || m.Role != message.RoleAssistant || m.Model != "test:model" || m.TurnID != turn || m.SessionID != e.sid {
				rt.Fatalf("message in flight: %+v, want status %s", m, want)
			}
			// The ring holds the start unless more events of the call
			// than it holds were emitted.
			missing := len(emitted)-streamedStart > ring
			if m.StartMissing != missing {
				rt.Fatalf("start_missing %v with %d of the call's events emitted and a ring of %d", m.StartMissing, len(emitted)-streamedStart, ring)
			}
		}
		if m == nil || m.StartMissing || stored {
			return
		}
		got, fin, done := streamtest.Continue(rt, m, msgID, envelopes(rt, drain(rt, att)))
		if completed {
			got, fin, done = m.Content, final, true
		}
		if !done {
			rt.Fatalf("no message.complete after the seam")
		}
		if d := streamtest.SameContent(got, fin); d != "" {
			rt.Fatalf("snapshot content + later deltas != final content: %s", d)
		}
		if d := streamtest.SameContent(fin, final); d != "" {
			rt.Fatalf("final content differs from the drawn one: %s", d)
		}
	})
}

// TestSnapshotPartialToolInput: a tool_use block whose input is still
// streaming is in the snapshot with input {} and the fragments so far as
// partial_input; a text block is cut exactly at the seam.
func TestSnapshotPartialToolInput(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{SnapshotMessages: 10, RingSize: 100})
	turn, msgID := "turn_1", "msg_1"
	emit := func(typ event.Type, p map[string]any) {
		t.Helper()
		if _, err := e.em.Emit(bus.Spec{Type: typ, Actor: event.ActorModel, TurnID: turn, Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	emit(event.TurnStarted, map[string]any{})
	emit(event.LLMCallStarted, map[string]any{"message_id": msgID, "model": "m"})
	emit(event.MessageStart, map[string]any{"message_id": msgID, "role": "assistant", "model": "m"})
	emit(event.TextDelta, map[string]any{"message_id": msgID, "content_block_index": 0, "text": "Let me "})
	emit(event.TextDelta, map[string]any{"message_id": msgID, "content_block_index": 0, "text": "look."})
	emit(event.ToolUseStart, map[string]any{"message_id": msgID, "content_block_index": 1, "tool_use_id": "tu_1", "tool_name": "read_file"})
	emit(event.ToolUseInputDelta, map[string]any{"message_id": msgID, "content_block_index": 1, "tool_use_id": "tu_1", "partial_json": `{"pa`})
	emit(event.ToolUseInputDelta, map[string]any{"message_id": msgID, "content_block_index": 1, "tool_use_id": "tu_1", "partial_json": `th": "a`})
	e.barrier()
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Snapshot: true})
	s := decodeSnapshot(t, att.Snapshot)
	last := string(s.Messages[len(s.Messages)-1])
	for _, want := range []string{`"status":"streaming"`, `{"type":"text","text":"Let me look."}`,
		`{"type":"tool_use","id":"tu_1","name":"read_file","input":{},"partial_input":"{\"path\": \"a"}`} {
		if !strings.Contains(last, want) {
			t.Errorf("snapshot's last message %s lacks %s", last, want)
		}
	}
	if strings.Contains(last, "start_missing") {
		t.Errorf("start_missing on a message whose start is held: %s", last)
	}
}

// TestSnapshotWithoutRingFlagsTheMessage: with no ring at all
// (--stream-ring 0) a snapshot mid-stream still names the message in
// flight, with no content and start_missing, rather than omitting it or
// showing nothing as if it were all.
func TestSnapshotWithoutRingFlagsTheMessage(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{SnapshotMessages: 10})
	emit := func(typ event.Type, p map[string]any) {
		t.Helper()
		if _, err := e.em.Emit(bus.Spec{Type: typ, Actor: event.ActorModel, TurnID: "turn_1", Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	emit(event.TurnStarted, map[string]any{})
	emit(event.LLMCallStarted, map[string]any{"message_id": "msg_1", "model": "m"})
	emit(event.MessageStart, map[string]any{"message_id": "msg_1", "role": "assistant", "model": "m"})
	emit(event.TextDelta, map[string]any{"message_id": "msg_1", "content_block_index": 0, "text": "gone"})
	e.barrier()
	s := decodeSnapshot(t, e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Snapshot: true}).Snapshot)
	m := snapshotMessage(t, s, "msg_1")
	if m == nil || !m.StartMissing || m.Status != protocol.StatusStreaming || len(m.Content) != 0 {
		t.Fatalf("message in flight without a ring: %+v", m)
	}
}

// TestBackfilledSnapshotHoldsMessageInFlight: a node that starts
// following a tree owned elsewhere (cluster mode) learns the tree's
// model call in flight with its backfill, so a snapshot taken there
// mid-stream carries the message built from the backfilled ring; a
// backfill that starts after the message's start flags it start_missing.
func TestBackfilledSnapshotHoldsMessageInFlight(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{SnapshotMessages: 10, RingSize: 100})
	var streamed []*event.Event
	emit := func(typ event.Type, p map[string]any) {
		t.Helper()
		ev, err := e.em.Emit(bus.Spec{Type: typ, Actor: event.ActorModel, TurnID: "turn_1", Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		if event.FamilyOf(typ) == event.Streaming {
			streamed = append(streamed, ev)
		}
	}
	emit(event.TurnStarted, map[string]any{})
	emit(event.LLMCallStarted, map[string]any{"message_id": "msg_1", "model": "m"})
	emit(event.MessageStart, map[string]any{"message_id": "msg_1", "role": "assistant", "model": "m"})
	emit(event.TextDelta, map[string]any{"message_id": "msg_1", "content_block_index": 0, "text": "one "})
	emit(event.TextDelta, map[string]any{"message_id": "msg_1", "content_block_index": 0, "text": "two"})
	e.barrier()
	through, err := st.LastEventID(e.ctx, e.sid)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		from    int // first backfilled streaming event
		text    string
		missing bool
	}{{"whole", 0, "one two", false}, {"without its start", 2, "two", true}} {
		t.Run(c.name, func(t *testing.T) {
			b2, h2 := startHub(t, st, hub.Config{SnapshotMessages: 10, RingSize: 100})
			evs := streamed[c.from:]
			if err := b2.Backfill(e.ctx, e.sid, evs[0].ID, through, evs); err != nil {
				t.Fatal(err)
			}
			att, serr := h2.Subscribe(e.ctx, e.sid, &protocol.Subscribe{Preset: event.PresetChat, Snapshot: true})
			if serr != nil {
				t.Fatalf("subscribe: %s", serr.Message)
			}
			defer h2.Unsubscribe(att.Client)
			m := snapshotMessage(t, decodeSnapshot(t, att.Snapshot), "msg_1")
			if m == nil || m.Status != protocol.StatusStreaming || m.StartMissing != c.missing || len(m.Content) != 1 || m.Content[0].Text != c.text {
				t.Fatalf("message in flight on the following node: %+v", m)
			}
		})
	}
}
