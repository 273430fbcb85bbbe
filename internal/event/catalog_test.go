package event

import (
	"encoding/json"
	"testing"
	"time"
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
