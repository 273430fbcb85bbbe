package spectest_test

// Spec §11.1 items 1, 2, 3, 6 and 16: what a client sees through a real
// WebSocket on loopback, compared with what the session delivered live
// (the harness recorder) and persisted.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestSpec11_1_1_HappyPathStream: a turn's events arrive in canonical
// order with well-formed envelopes; per message, the text and thinking
// deltas rebuild message.complete's final_content, the tool input
// fragments parse to tool.use_end's final_input, and final_content is
// what the messages endpoint persisted.
func TestSpec11_1_1_HappyPathStream(t *testing.T) {
	streamtest.EachTransport(t, testHappyPathStream)
}

func testHappyPathStream(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c, ack, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	if ack.Snapshot || ack.Since != nil || ack.ReplayEventCount != 0 || ack.StreamingGap {
		t.Fatalf("ack %+v", ack)
	}
	if want := streamtest.PresetTypes(event.PresetChat); len(ack.ResolvedFilter.EventTypes) != len(want) {
		t.Fatalf("resolved filter %v, want preset:chat's %d types", ack.ResolvedFilter.EventTypes, len(want))
	}
	turn := h.Submit(sid, "what is in my workspace?")
	evs := until(t, c, event.TurnCompleted, turn)

	if got := streamtest.Collapse(streamtest.Types(evs)); !slices.Equal(got, streamtest.DemoTurnChat) {
		t.Fatalf("event order\n got %v\nwant %v", got, streamtest.DemoTurnChat)
	}
	streamtest.CheckIncreasing(t, "stream", evs, ack.SeamEventID)
	if created := storedEvents(t, h, sid)[0]; ack.SeamEventID < created.ID {
		t.Fatalf("seam_event_id %q is before session.created %s", ack.SeamEventID, created.ID)
	}
	streamtest.SameIDs(t, "client vs delivered", evs, delivered(h, sid, "", evs[len(evs)-1].ID, streamtest.PresetTypes(event.PresetChat)))
	for _, e := range evs {
		if !strings.HasPrefix(e.ID, event.IDPrefix) || e.SessionID != sid || e.TurnID == nil || *e.TurnID != turn || e.Actor == "" {
			t.Fatalf("envelope %+v", e)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.TS); err != nil {
			t.Fatalf("ts %q: %v", e.TS, err)
		}
	}

	// Rebuild every message from its deltas.
	type blockKey struct {
		msg string
		idx int
	}
	text, thinking, input := map[blockKey]string{}, map[blockKey]string{}, map[blockKey]string{}
	sigs := map[blockKey]*string{}
	starts := map[string]bool{}
	uses := map[blockKey]streamtest.ToolUsePayload{}
	ends := map[blockKey]streamtest.ToolUsePayload{}
	completes := map[string]streamtest.CompletePayload{}
	var order []string // message ids in order
	llmStarted := map[string]bool{}
	for _, e := range evs {
		switch event.Type(e.Type) {
		case event.LLMCallStarted:
			llmStarted[streamtest.PayloadOf[streamtest.LLMPayload](t, e).MessageID] = true
		case event.MessageStart:
			var p struct {
				MessageID string `json:"message_id"`
				Role      string `json:"role"`
				Model     string `json:"model"`
			}
			servertest.Must(t, json.Unmarshal(e.Payload, &p))
			if p.Role != "assistant" || p.Model != "builtin:demo" || !llmStarted[p.MessageID] {
				t.Fatalf("message.start %s", e.Payload)
			}
			starts[p.MessageID] = true
			order = append(order, p.MessageID)
		case event.TextDelta:
			d := streamtest.PayloadOf[streamtest.DeltaPayload](t, e)
			text[blockKey{d.MessageID, d.Index}] += d.Text
		case event.ThinkingDelta:
			d := streamtest.PayloadOf[streamtest.DeltaPayload](t, e)
			k := blockKey{d.MessageID, d.Index}
			if sigs[k] != nil {
				t.Fatalf("thinking delta after the one carrying the signature: %s", e.Payload)
			}
			thinking[k] += d.Text
			sigs[k] = d.Signature
		case event.ToolUseStart:
			d := streamtest.PayloadOf[streamtest.ToolUsePayload](t, e)
			uses[blockKey{d.MessageID, d.Index}] = d
		case event.ToolUseInputDelta:
			d := streamtest.PayloadOf[streamtest.ToolInputPayload](t, e)
			k := blockKey{d.MessageID, d.Index}
			if uses[k].ToolUseID != d.ToolUseID {
				t.Fatalf("input delta for %s before its tool.use_start", d.ToolUseID)
			}
			input[k] += d.PartialJSON
		case event.ToolUseEnd:
			d := streamtest.PayloadOf[streamtest.ToolUsePayload](t, e)
			ends[blockKey{d.MessageID, d.Index}] = d
		case event.MessageComplete:
			d := streamtest.PayloadOf[streamtest.CompletePayload](t, e)
			if !starts[d.MessageID] {
				t.Fatalf("message.complete for %s without message.start", d.MessageID)
			}
			completes[d.MessageID] = d
		case event.LLMCallCompleted:
			d := streamtest.PayloadOf[streamtest.LLMPayload](t, e)
			mc, ok := completes[d.MessageID]
			if !ok || mc.StopReason != d.StopReason || mc.Usage != d.Usage {
				t.Fatalf("llm.call_completed %s does not match message.complete %+v", e.Payload, mc)
			}
		}
	}
	if len(order) != 2 {
		t.Fatalf("%d messages streamed, want 2", len(order))
	}
	persisted := map[string]message.Message{}
	for _, m := range messages(t, h, sid) {
		persisted[m.ID] = m
	}
	for _, id := range order {
		mc := completes[id]
		if len(mc.FinalContent) == 0 {
			t.Fatalf("message %s: empty final_content", id)
		}
		for i, b := range mc.FinalContent {
			k := blockKey{id, i}
			switch b.Type {
			case message.BlockText:
				if text[k] != b.Text {
					t.Errorf("message %s block %d: deltas give %q, final_content %q", id, i, text[k], b.Text)
				}
			case message.BlockThinking:
				if thinking[k] != b.Thinking {
					t.Errorf("message %s block %d: thinking deltas give %q, final_content %q", id, i, thinking[k], b.Thinking)
				}
				if sigs[k] == nil || *sigs[k] != b.Signature {
					t.Errorf("message %s block %d: last thinking delta signature %v, block %q", id, i, sigs[k], b.Signature)
				}
			case message.BlockToolUse:
				u, e := uses[k], ends[k]
				if u.ToolUseID != b.ID || u.ToolName != b.Name || e.ToolUseID != b.ID {
					t.Errorf("tool use block %+v: start %+v end %+v", b, u, e)
				}
				if !json.Valid([]byte(input[k])) || !streamtest.JSONEqual([]byte(input[k]), e.FinalInput) || !streamtest.JSONEqual(e.FinalInput, b.Input) {
					t.Errorf("tool input: fragments %q, final_input %s, block input %s", input[k], e.FinalInput, b.Input)
				}
			default:
				t.Errorf("unexpected block %+v", b)
			}
		}
		for k := range text {
			if k.msg == id && (k.idx >= len(mc.FinalContent) || mc.FinalContent[k.idx].Type != message.BlockText) {
				t.Errorf("text deltas for block %d not in final_content", k.idx)
			}
		}
		p, ok := persisted[id]
		if !ok {
			t.Fatalf("message %s not persisted", id)
		}
		a, _ := json.Marshal(p.Content)
		b, _ := json.Marshal(mc.FinalContent)
		if !streamtest.JSONEqual(a, b) || p.Status != message.StatusComplete {
			t.Errorf("persisted %s (%s) differs from final_content %s", a, p.Status, b)
		}
	}
	if mc := completes[order[0]]; mc.StopReason != "tool_use" {
		t.Errorf("first message stop_reason %q", mc.StopReason)
	}
	if mc := completes[order[1]]; mc.StopReason != "end_turn" {
		t.Errorf("second message stop_reason %q", mc.StopReason)
	}
}

// TestSpec11_1_2_SnapshotConsistency: a snapshot taken between turns
// and one taken mid-turn each hold exactly the messages committed with
// events <= snapshot_at_event_id, name the turn in flight, and are
// followed by exactly the events after that id, in order.
func TestSpec11_1_2_SnapshotConsistency(t *testing.T) {
	streamtest.EachTransport(t, testSnapshotConsistency)
}

func testSnapshotConsistency(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", demoDelay(time.Millisecond))
	sid := h.CreateSession()

	// An empty session: no messages, the seam is session.created.
	_, _, snap0 := attachSub(t, tr, h, sid, "preset:chat", nil, true)
	created := storedEvents(t, h, sid)[0]
	if len(snap0.Messages) != 0 || snap0.HasMoreMessages || snap0.SnapshotAtEventID < created.ID {
		t.Fatalf("snapshot of an empty session: %+v", snap0)
	}

	h.Submit(sid, "what is in my workspace?")
	h.WaitTurn(sid)

	c1, ack1, snap1 := attachSub(t, tr, h, sid, "preset:full", nil, true)
	if !ack1.Snapshot || ack1.ReplayEventCount != 0 {
		t.Fatalf("ack %+v", ack1)
	}
	sum1 := snapshotSession(t, snap1)
	if sum1.ID != sid || sum1.WorkspacePath != h.Workspace || sum1.ActiveModel != "builtin:demo" || sum1.CurrentTurnID != nil || sum1.CurrentTurnStatus != nil {
		t.Fatalf("session between turns: %s", snap1.Session)
	}

	// Mid-turn: a long answer is streaming.
	// Counted from here: the first answer's deltas are not the long one's.
	earlier := countDelivered(h, sid, event.TextDelta)
	long := h.Submit(sid, "/long 300")
	servertest.WaitFor(t, "deltas of the long answer", func() bool { return countDelivered(h, sid, event.TextDelta) >= earlier+100 })
	c2, _, snap2 := attachSub(t, tr, h, sid, "preset:full", nil, true)
	sum2 := snapshotSession(t, snap2)
	if sum2.CurrentTurnID == nil || *sum2.CurrentTurnID != long || sum2.CurrentTurnStatus == nil || *sum2.CurrentTurnStatus != "in_flight" {
		t.Fatalf("session mid-turn: %s", snap2.Session)
	}
	if started := firstDelivered(t, h, sid, event.TurnStarted, long); snap2.SnapshotAtEventID <= started.ID {
		t.Fatalf("mid-turn seam %s is not after turn.started %s", snap2.SnapshotAtEventID, started.ID)
	}

	ev1 := until(t, c1, event.TurnCompleted, long)
	ev2 := until(t, c2, event.TurnCompleted, long)
	end := ev1[len(ev1)-1].ID
	for _, x := range []struct {
		snap *protocol.Snapshot
		evs  []*protocol.EventEnvelope
	}{{snap1, ev1}, {snap2, ev2}} {
		streamtest.CheckIncreasing(t, "events after the snapshot", x.evs, x.snap.SnapshotAtEventID)
		streamtest.SameIDs(t, "events after the snapshot", x.evs, delivered(h, sid, x.snap.SnapshotAtEventID, end, nil))
	}

	final := messages(t, h, sid)
	anchor := anchors(t, h, sid, final)
	var inFlight [2]*message.Message
	for i, s := range []*protocol.Snapshot{snap1, snap2} {
		var stored []json.RawMessage
		stored, inFlight[i] = streamtest.InFlight(t, s, anchor)
		want := streamtest.AsOf(final, anchor, s.SnapshotAtEventID, h.Config.SnapshotMessages)
		if !streamtest.SameJSON(stored, want) {
			t.Fatalf("snapshot as of %s:\n got %s\nwant %s", s.SnapshotAtEventID, streamtest.MessageIDs(stored), streamtest.MessageIDs(want))
		}
	}
	if len(snap1.Messages) != 4 || len(snap2.Messages) != 6 || inFlight[0] != nil {
		t.Fatalf("snapshots hold %d and %d messages, want 4 and 6 (the long answer's user message and the answer so far)", len(snap1.Messages), len(snap2.Messages))
	}

	// The mid-turn snapshot holds the answer streamed so far (contract
	// §11), and the deltas after the seam complete it: they are the
	// rest of the final text.
	last := final[len(final)-1]
	if m := inFlight[1]; m == nil || m.ID != last.ID || m.Status != protocol.StatusStreaming || m.StartMissing || m.TurnID != long {
		t.Fatalf("the mid-turn snapshot's message in flight: %+v, want the long answer %s streaming", m, last.ID)
	}
	var tail strings.Builder
	for _, e := range ev2 {
		if e.Type == string(event.TextDelta) {
			tail.WriteString(streamtest.PayloadOf[streamtest.DeltaPayload](t, e).Text)
		}
	}
	if head, full := inFlight[1].PlainText(), last.PlainText(); head == "" || tail.Len() == 0 || head+tail.String() != full {
		t.Fatalf("the snapshot's %d bytes and the %d bytes of deltas after the mid-turn seam do not make the answer's %d bytes", len(head), tail.Len(), len(full))
	}
	var mc streamtest.CompletePayload
	for _, e := range ev2 {
		if e.Type == string(event.MessageComplete) {
			mc = streamtest.PayloadOf[streamtest.CompletePayload](t, e)
		}
	}
	if mc.MessageID != last.ID || len(mc.FinalContent) != 1 || mc.FinalContent[0].Text != last.PlainText() {
		t.Fatalf("message.complete after the seam does not carry the persisted answer")
	}
}

// TestSpec11_1_2_SnapshotSessionCountsAsOfSeam: the snapshot's session
// counters are consistent as of snapshot_at_event_id (spec §3.4, §9.4):
// turn_count counts exactly the turn.started events <= the seam. A client
// attaches the moment a turn has started.
func TestSpec11_1_2_SnapshotSessionCountsAsOfSeam(t *testing.T) {
	streamtest.EachTransport(t, testSnapshotSessionCountsAsOfSeam)
}

func testSnapshotSessionCountsAsOfSeam(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", demoDelay(time.Millisecond))
	sid := h.CreateSession()
	for i := range 15 {
		c := connect(t, tr, h, sid)
		turn := h.Submit(sid, "/echo counted")
		_, snap := subscribeOn(t, c, "preset:chat", nil, true)
		sum := snapshotSession(t, snap)
		n := 0
		for _, e := range storedEvents(t, h, sid, event.TurnStarted) {
			if e.ID <= snap.SnapshotAtEventID {
				n++
			}
		}
		if sum.TurnCount != n {
			t.Fatalf("iteration %d: snapshot as of %s says turn_count %d; %d turn.started events are <= the seam (turn %s in flight)",
				i, snap.SnapshotAtEventID, sum.TurnCount, n, turn)
		}
		c.Close()
		h.WaitTurn(sid)
	}
}

type sessionSummary struct {
	ID                string  `json:"id"`
	WorkspacePath     string  `json:"workspace_path"`
	ActiveModel       string  `json:"active_model"`
	TurnCount         int     `json:"turn_count"`
	CostSoFarUSD      float64 `json:"cost_so_far_usd"`
	CurrentTurnID     *string `json:"current_turn_id"`
	CurrentTurnStatus *string `json:"current_turn_status"`
}

func snapshotSession(t *testing.T, s *protocol.Snapshot) sessionSummary {
	t.Helper()
	var sum sessionSummary
	if err := json.Unmarshal(s.Session, &sum); err != nil {
		t.Fatalf("snapshot session %s: %v", s.Session, err)
	}
	return sum
}

// TestSpec11_1_3_ReconnectWithReplay: a client drops mid-turn, the
// session goes on (the turn ends, another runs), and it reconnects with
// since = its last event and snapshot false: the replay and then the
// live stream are exactly what an uninterrupted client with the same
// filter saw after that id, without duplicates or gaps.
func TestSpec11_1_3_ReconnectWithReplay(t *testing.T) {
	streamtest.EachTransport(t, testReconnectWithReplay)
}

func testReconnectWithReplay(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", demoDelay(time.Millisecond))
	sid := h.CreateSession()
	b, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	a, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)

	t1 := h.Submit(sid, "what is in my workspace?")
	before := until(t, a, event.ToolCalled, t1)
	a.Close()
	cursor := before[len(before)-1].ID
	h.WaitTurn(sid)
	t2 := h.Submit(sid, "/echo while you were away")
	h.WaitTurn(sid)

	a2, ack, _ := attachSub(t, tr, h, sid, "preset:chat", &cursor, false)
	if ack.Since == nil || *ack.Since != cursor || ack.Snapshot || ack.StreamingGap {
		t.Fatalf("ack %+v", ack)
	}
	t3 := h.Submit(sid, "/echo back again")
	after := until(t, a2, event.TurnCompleted, t3)
	all := until(t, b, event.TurnCompleted, t3)

	streamtest.CheckIncreasing(t, "replay and live", after, cursor)
	if got, want := streamtest.IDs(append(before, after...)), streamtest.IDs(all); !slices.Equal(got, want) {
		t.Fatalf("dropped client saw %d events, uninterrupted %d", len(got), len(want))
	}
	// The replay is exactly the events in (cursor, end of t2].
	end2 := firstDelivered(t, h, sid, event.TurnCompleted, t2).ID
	want := delivered(h, sid, cursor, end2, streamtest.PresetTypes(event.PresetChat))
	if ack.ReplayEventCount != len(want) {
		t.Fatalf("replay_event_count %d, want %d", ack.ReplayEventCount, len(want))
	}
	streamtest.SameIDs(t, "replay", after[:ack.ReplayEventCount], want)

	// Reconnecting with the newest id replays nothing.
	last := all[len(all)-1].ID
	_, ack2, _ := attachSub(t, tr, h, sid, "preset:chat", &last, false)
	if ack2.ReplayEventCount != 0 || ack2.StreamingGap {
		t.Fatalf("ack at the head %+v", ack2)
	}
}

// TestSpec11_1_3_ReconnectMidMessage: the client drops in the middle of
// an assistant message and comes back while the same message is still
// streaming: the deltas after its cursor come back from the ring
// (streaming_gap false), then the live deltas follow, and the text it
// rebuilds is the whole message.
func TestSpec11_1_3_ReconnectMidMessage(t *testing.T) {
	streamtest.EachTransport(t, testReconnectMidMessage)
}

func testReconnectMidMessage(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", demoDelay(time.Millisecond))
	sid := h.CreateSession()
	b, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	a, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	turn := h.Submit(sid, "/long 300")

	var before []*protocol.EventEnvelope
	for streamtest.CountType(before, event.TextDelta) < 40 {
		before = append(before, a.Events(readTimeout, func(*protocol.EventEnvelope) bool { return true })...)
	}
	a.Close()
	cursor := before[len(before)-1].ID
	servertest.WaitFor(t, "more deltas", func() bool { return countDelivered(h, sid, event.TextDelta) >= 160 })

	a2, ack, _ := attachSub(t, tr, h, sid, "preset:chat", &cursor, false)
	if ack.StreamingGap {
		t.Fatalf("streaming_gap with the deltas in the ring: %+v", ack)
	}
	after := until(t, a2, event.TurnCompleted, turn)
	all := until(t, b, event.TurnCompleted, turn)
	streamtest.CheckIncreasing(t, "replay and live", after, cursor)
	if got, want := streamtest.IDs(append(before, after...)), streamtest.IDs(all); !slices.Equal(got, want) {
		t.Fatalf("dropped client saw %d events, uninterrupted %d", len(got), len(want))
	}
	replay := after[:ack.ReplayEventCount]
	if streamtest.CountType(replay, event.TextDelta) < 100 {
		t.Fatalf("replay carries %d text deltas; the ring should have returned at least 100", streamtest.CountType(replay, event.TextDelta))
	}
	if streamtest.CountType(after[ack.ReplayEventCount:], event.TextDelta) == 0 || streamtest.CountType(replay, event.MessageComplete) != 0 {
		t.Fatalf("the message was not still streaming after the replay")
	}
	var text strings.Builder
	var final string
	for _, e := range append(before, after...) {
		switch event.Type(e.Type) {
		case event.TextDelta:
			text.WriteString(streamtest.PayloadOf[streamtest.DeltaPayload](t, e).Text)
		case event.MessageComplete:
			final = streamtest.PayloadOf[streamtest.CompletePayload](t, e).FinalContent[0].Text
		}
	}
	if text.String() != final || !strings.HasSuffix(final, "Sentence 300 of 300. ") {
		t.Fatalf("rebuilt text (%d bytes) differs from final_content (%d bytes)", text.Len(), len(final))
	}
}

// TestSpec11_1_3_ReconnectRingExhausted: with a ring of 5 streaming
// events, a client that reconnects after the turn gets streaming_gap
// true, every catalog event after its cursor, and only the streaming
// events still in the ring.
func TestSpec11_1_3_ReconnectRingExhausted(t *testing.T) {
	streamtest.EachTransport(t, testReconnectRingExhausted)
}

func testReconnectRingExhausted(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", streamRing(5))
	sid := h.CreateSession()
	b, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	a, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	turn := h.Submit(sid, "what is in my workspace?")
	before := until(t, a, event.TextDelta, "")
	a.Close()
	cursor := before[len(before)-1].ID
	all := until(t, b, event.TurnCompleted, turn)
	h.WaitTurn(sid)

	a2, ack, _ := attachSub(t, tr, h, sid, "preset:chat", &cursor, false)
	if !ack.StreamingGap {
		t.Fatalf("ack %+v: want streaming_gap true", ack)
	}
	replay := a2.Events(readTimeout, streamtest.UntilType(event.TurnCompleted, turn))
	if len(replay) != ack.ReplayEventCount {
		t.Fatalf("replay of %d events, ack says %d", len(replay), ack.ReplayEventCount)
	}
	// Expected: B's events after the cursor, keeping of the streaming
	// ones only the session's last five.
	var streaming []string
	for _, e := range h.Live.Events(sid) {
		if event.FamilyOf(e.Type) == event.Streaming {
			streaming = append(streaming, e.ID)
		}
	}
	inRing := map[string]bool{}
	for _, id := range streaming[len(streaming)-5:] {
		inRing[id] = true
	}
	var want []string
	catalog := 0
	for _, e := range all {
		if e.ID <= cursor {
			continue
		}
		if event.FamilyOf(event.Type(e.Type)) == event.Catalog {
			want = append(want, e.ID)
			catalog++
		} else if inRing[e.ID] {
			want = append(want, e.ID)
		}
	}
	if got := streamtest.IDs(replay); !slices.Equal(got, want) {
		t.Fatalf("replay\n got %v\nwant %v", streamtest.Types(replay), want)
	}
	if catalog < 6 {
		t.Fatalf("only %d catalog events after the cursor", catalog)
	}
}

// TestSpec11_1_6_MultiClientIdenticalStreams: clients with the same
// filter receive byte-identical event sequences; a preset:full client
// sees the same events plus the meta-events.
func TestSpec11_1_6_MultiClientIdenticalStreams(t *testing.T) {
	streamtest.EachTransport(t, testMultiClientIdenticalStreams)
}

func testMultiClientIdenticalStreams(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	var chat []streamtest.Conn
	for range 3 {
		c, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
		chat = append(chat, c)
	}
	full, _, _ := attachSub(t, tr, h, sid, "preset:full", nil, false)
	turn := h.Submit(sid, "what is in my workspace?")
	var first []string
	var firstRaw [][]byte
	for i, c := range chat {
		var evs []*protocol.EventEnvelope
		var raw [][]byte
		for {
			f := readSkippingPings(t, c)
			if f.Event == nil {
				t.Fatalf("client %d: %s", i, f.Raw)
			}
			evs, raw = append(evs, f.Event), append(raw, f.Raw)
			if f.Event.Type == string(event.TurnCompleted) {
				break
			}
		}
		if i == 0 {
			first, firstRaw = streamtest.IDs(evs), raw
			streamtest.SameIDs(t, "client 0", evs, delivered(h, sid, "", evs[len(evs)-1].ID, streamtest.PresetTypes(event.PresetChat)))
			continue
		}
		if !slices.Equal(streamtest.IDs(evs), first) {
			t.Fatalf("client %d saw %d events, client 0 %d", i, len(evs), len(first))
		}
		for k := range raw {
			if string(raw[k]) != string(firstRaw[k]) {
				t.Fatalf("client %d frame %d differs:\n%s\n%s", i, k, raw[k], firstRaw[k])
			}
		}
	}
	fe := until(t, full, event.TurnCompleted, turn)
	chatSet := streamtest.PresetTypes(event.PresetChat)
	var filtered []string
	for _, e := range fe {
		if chatSet[e.Type] {
			filtered = append(filtered, e.ID)
		}
	}
	if !slices.Equal(filtered, first) {
		t.Fatalf("preset:full client, filtered to chat types, differs from the chat clients")
	}
}

// TestDemoToolUseIDsUniqueAcrossTurns: every tool call keeps its own
// row. builtin:demo names its tool uses "tu_demo_<tool>_<block index>",
// the same in every turn (and session), and tool_calls is keyed by that
// id, so a later turn's call replaces the earlier turn's row.
func TestDemoToolUseIDsUniqueAcrossTurns(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	var turns []string
	for range 2 {
		turns = append(turns, h.Submit(sid, "what is in my workspace?"))
		h.WaitTurn(sid)
	}
	for _, turn := range turns {
		calls, err := h.Server.Store.ToolCalls(context.Background(), turn)
		servertest.Must(t, err)
		if len(calls) != 1 {
			t.Fatalf("turn %s has %d tool call rows, want 1", turn, len(calls))
		}
	}
}
