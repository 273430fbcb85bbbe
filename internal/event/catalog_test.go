package event

import (
	"encoding/json"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestCatalogFamiliesAndPresets(t *testing.T) {
	full, ok := Preset(PresetFull)
	if !ok || len(full) != len(All()) {
		t.Fatalf("preset:full has %d types, catalog %d", len(full), len(All()))
	}
	chat, _ := Preset(PresetChat)
	in := map[Type]bool{}
	for _, c := range chat {
		in[c] = true
	}
	for _, want := range []Type{TextDelta, ToolUseStart, ToolCompleted, RouteDecided, TurnStarted, TurnCancelled, FeedbackSubmitted, DelegateStarted, LLMCallFailed} {
		if !in[want] {
			t.Errorf("preset:chat lacks %s", want)
		}
	}
	for _, not := range []Type{BusHandlerWarning, BusSubscriberUnregister} {
		if in[not] {
			t.Errorf("preset:chat includes %s", not)
		}
	}
	if _, ok := Preset("preset:nope"); ok {
		t.Error("unknown preset accepted")
	}
	for _, s := range []Type{MessageStart, TextDelta, ThinkingDelta, ToolUseStart, ToolUseInputDelta, ToolUseEnd, MessageComplete} {
		if FamilyOf(s) != Streaming {
			t.Errorf("%s: family %v", s, FamilyOf(s))
		}
	}
	if FamilyOf(TurnStarted) != Catalog || Known("made.up.thing") {
		t.Error("family lookup")
	}
	if TextDelta.Domain() != "text" || ToolUseEnd.Domain() != "tool" {
		t.Error("domain")
	}
}

func TestEnvelopeEncoding(t *testing.T) {
	ts := time.Date(2026, 5, 8, 14, 23, 11, 123456789, time.UTC)
	ev := &Event{ID: "evt_01J0000000000000000000000A", Type: TurnStarted, SessionID: "sess_1", TS: ts, Actor: ActorUser}
	if err := ev.Seal(); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(ev.JSON(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "type", "session_id", "turn_id", "ts", "actor", "payload"} {
		if _, ok := m[k]; !ok {
			t.Errorf("envelope lacks %q", k)
		}
	}
	if m["turn_id"] != nil {
		t.Errorf("turn_id outside a turn = %v, want null", m["turn_id"])
	}
	if m["ts"] != "2026-05-08T14:23:11.123456789Z" {
		t.Errorf("ts = %v", m["ts"])
	}
	back, err := Decode(ev.JSON())
	if err != nil || back.ID != ev.ID || !back.TS.Equal(ts) || back.TurnID != "" {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	ev2 := &Event{ID: "x", Type: TextDelta, TurnID: "turn_1", Payload: json.RawMessage(`{"text":"hi"}`)}
	ev2.Seal()
	if err := json.Unmarshal(ev2.JSON(), &m); err != nil || m["turn_id"] != "turn_1" {
		t.Fatalf("turn id: %v %v", m["turn_id"], err)
	}
	bad := &Event{ID: "y", Type: TextDelta, Payload: json.RawMessage(`{nope`)}
	if err := bad.Seal(); err == nil {
		t.Fatal("sealed a broken payload")
	}
}

// TestEnvelopeEncodingMatchesEncodingJSON: the hand-written envelope is
// byte for byte what encoding/json produces, for any field contents.
func TestEnvelopeEncodingMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		str := rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z_.<>&"\\\n\t\x00-\x1f\x{2028}\x{2029}é✓]{0,12}`),
			rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }))
		payload := map[string]any{"text": str.Draw(rt, "text"), "n": rapid.IntRange(-5, 5).Draw(rt, "n")}
		raw, _ := json.Marshal(payload)
		ev := &Event{ID: str.Draw(rt, "id"), Type: Type(str.Draw(rt, "type")), SessionID: str.Draw(rt, "session"),
			TurnID: str.Draw(rt, "turn"), Actor: str.Draw(rt, "actor"), Payload: raw,
			TS: time.Unix(rapid.Int64Range(0, 4e9).Draw(rt, "s"), rapid.Int64Range(0, 999999999).Draw(rt, "ns"))}
		got, err := ev.encode(false)
		if err != nil {
			rt.Fatal(err)
		}
		trusted, _ := ev.encode(true)
		if string(trusted) != string(got) {
			rt.Fatalf("trusted encoding differs:\n%s\n%s", trusted, got)
		}
		w := wireEvent{ID: ev.ID, Type: ev.Type, SessionID: ev.SessionID, TS: ev.TS.UTC().Format(TSFormat), Actor: ev.Actor, Payload: raw}
		if ev.TurnID != "" {
			w.TurnID = &ev.TurnID
		}
		want, _ := json.Marshal(w)
		if string(got) != string(want) {
			rt.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	payload, _ := json.Marshal(map[string]any{"message_id": "msg_01JD8X4Q7ZK3V0M2N5P8R9S1T4", "content_block_index": 0, "text": "hello world "})
	for b.Loop() {
		ev := &Event{ID: "evt_01JD8X4Q7ZK3V0M2N5P8R9S1T4", Type: TextDelta, SessionID: "sess_01JD8X4Q7ZK3V0M2N5P8R9S1T4",
			TurnID: "turn_01JD8X4Q7ZK3V0M2N5P8R9S1T4", TS: time.Now(), Actor: ActorModel, Payload: payload}
		if err := ev.Seal(); err != nil {
			b.Fatal(err)
		}
	}
}
