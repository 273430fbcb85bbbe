package streamtest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/protocol"
)

func envs(pairs ...string) []*protocol.EventEnvelope {
	var out []*protocol.EventEnvelope
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, &protocol.EventEnvelope{ID: pairs[i], Type: pairs[i+1]})
	}
	return out
}

func recs(pairs ...string) []*event.Event {
	var out []*event.Event
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, &event.Event{ID: pairs[i], Type: event.Type(pairs[i+1])})
	}
	return out
}

// fatalRecorder is a testing.TB that records whether a helper failed
// it, and stops the helper's goroutine as t.Fatal does.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	panic(f)
}
func (f *fatalRecorder) Fatal(...any) { f.Fatalf("") }

// fails reports whether fn failed its TB.
func fails(t *testing.T, fn func(tb testing.TB)) (failed bool) {
	t.Helper()
	r := &fatalRecorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	fn(r)
	return false
}

func TestCollapseFoldsRuns(t *testing.T) {
	got := Collapse(Types(envs("a", "x", "b", "x", "c", "y", "d", "x")))
	if want := []string{"x", "y", "x"}; !slices.Equal(got, want) {
		t.Fatalf("Collapse = %v, want %v", got, want)
	}
}

func TestCheckIncreasing(t *testing.T) {
	ok := envs("b", "x", "c", "x")
	if fails(t, func(tb testing.TB) { CheckIncreasing(tb, "ok", ok, "a") }) {
		t.Fatal("strictly increasing ids after the bound failed")
	}
	for name, c := range map[string]struct {
		evs   []*protocol.EventEnvelope
		after string
	}{
		"duplicate":    {envs("b", "x", "b", "x"), "a"},
		"out of order": {envs("c", "x", "b", "x"), "a"},
		"not after":    {envs("b", "x"), "b"},
		"before bound": {envs("a", "x", "c", "x"), "b"},
	} {
		if !fails(t, func(tb testing.TB) { CheckIncreasing(tb, name, c.evs, c.after) }) {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestBetween(t *testing.T) {
	evs := recs("a", "turn.started", "b", "text.delta", "c", "turn.completed", "d", "text.delta")
	set := map[string]bool{"turn.started": true, "turn.completed": true}
	for _, c := range []struct {
		after, upTo string
		set         map[string]bool
		want        []string
	}{
		{"", "", nil, []string{"a", "b", "c", "d"}},
		{"a", "c", nil, []string{"b", "c"}},
		{"", "", set, []string{"a", "c"}},
		{"a", "", set, []string{"c"}},
	} {
		if got := EventIDs(Between(evs, c.after, c.upTo, c.set)); !slices.Equal(got, c.want) {
			t.Errorf("Between(%q, %q, %v) = %v, want %v", c.after, c.upTo, c.set, got, c.want)
		}
	}
}

func TestSameIDs(t *testing.T) {
	want := recs("a", "x", "b", "y")
	if fails(t, func(tb testing.TB) { SameIDs(tb, "same", envs("a", "x", "b", "y"), want) }) {
		t.Fatal("equal lists failed")
	}
	for name, got := range map[string][]*protocol.EventEnvelope{
		"missing": envs("a", "x"),
		"extra":   envs("a", "x", "b", "y", "c", "z"),
		"other":   envs("a", "x", "c", "y"),
	} {
		if !fails(t, func(tb testing.TB) { SameIDs(tb, name, got, want) }) {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJSONEqual(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2], "a": 1 }`, true},
		{`{"a":1}`, `{"a":2}`, false},
		{`not json`, `not json`, true},
		{`not json`, `"not json"`, false},
	} {
		if got := JSONEqual([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("JSONEqual(%s, %s) = %v", c.a, c.b, got)
		}
	}
	if !SameJSON([]json.RawMessage{[]byte(`{"a":1,"b":2}`)}, []json.RawMessage{[]byte(`{"b":2,"a":1}`)}) {
		t.Error("SameJSON of reordered keys")
	}
	if SameJSON([]json.RawMessage{[]byte(`1`)}, nil) {
		t.Error("SameJSON of different lengths")
	}
}

func TestPresetFilterIsSortedPresetTypes(t *testing.T) {
	chat := PresetTypes(event.PresetChat)
	f := PresetFilter(event.PresetChat)(true)
	if !f.IncludeWorkerSessions || len(f.EventTypes) != len(chat) || !slices.IsSorted(f.EventTypes) {
		t.Fatalf("filter %+v for %d types", f, len(chat))
	}
	for _, ty := range f.EventTypes {
		if !chat[ty] {
			t.Fatalf("%s is not in preset:chat", ty)
		}
	}
	if PresetFilter(event.PresetChat)(false).IncludeWorkerSessions {
		t.Fatal("workers included")
	}
}

// TestAnchorsAndAsOf: each message is anchored on the catalog event it
// was committed with, and AsOf keeps the newest messages anchored at or
// before an id.
func TestAnchorsAndAsOf(t *testing.T) {
	user := message.Message{ID: "m1", Role: message.RoleUser, TurnID: "t1"}
	asst := message.Message{ID: "m2", Role: message.RoleAssistant, TurnID: "t1"}
	tool := message.Message{ID: "m3", Role: message.RoleTool, TurnID: "t1",
		Content: []message.Block{{Type: message.BlockToolResult, ToolUseID: "u1"}}}
	started, _ := json.Marshal(map[string]any{"user_message": user})
	stored := []*event.Event{
		{ID: "e1", Type: event.TurnStarted, TurnID: "t1", Payload: started},
		{ID: "e2", Type: event.LLMCallCompleted, TurnID: "t1", Payload: json.RawMessage(`{"message_id":"m2"}`)},
		{ID: "e3", Type: event.ToolCompleted, TurnID: "t1", Payload: json.RawMessage(`{"tool_use_id":"u1"}`)},
	}
	msgs := []message.Message{user, asst, tool}
	a := Anchors(t, stored, msgs)
	if a["m1"] != "e1" || a["m2"] != "e2" || a["m3"] != "e3" {
		t.Fatalf("anchors %v", a)
	}
	if got := MessageIDs(AsOf(msgs, a, "e2", 10)); got != "user:m1 assistant:m2" {
		t.Fatalf("as of e2: %s", got)
	}
	if got := MessageIDs(AsOf(msgs, a, "e3", 2)); got != "assistant:m2 tool:m3" {
		t.Fatalf("as of e3, newest 2: %s", got)
	}
	if !fails(t, func(tb testing.TB) { Anchors(tb, stored[:1], msgs) }) {
		t.Fatal("a message without its anchor passed")
	}
}
