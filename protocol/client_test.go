package protocol_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/protocol"
)

func typeNames(ts []protocol.EventType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

func presetNames(name string) []string {
	ts, ok := protocol.Preset(name)
	if !ok {
		panic(name)
	}
	return typeNames(ts)
}

func TestDecodeClientFrameValid(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		check func(t *testing.T, f protocol.ClientFrame)
	}{
		{"subscribe preset", `{"type":"subscribe","filter":"preset:chat","since":null,"snapshot":true}`, func(t *testing.T, f protocol.ClientFrame) {
			s := f.Subscribe
			if s.Preset != protocol.PresetChat || s.Since != nil || !s.Snapshot || s.Filter.EventTypes != nil {
				t.Fatalf("%+v", s)
			}
		}},
		{"subscribe filter object", `{"type":"subscribe","filter":{"event_types":["text.delta","turn.completed"],"actors":null,"include_worker_sessions":true},"since":"evt_01HZ0000000000000000000000","snapshot":false}`, func(t *testing.T, f protocol.ClientFrame) {
			s := f.Subscribe
			if s.Preset != "" || !slices.Equal(s.Filter.EventTypes, []string{"text.delta", "turn.completed"}) || s.Filter.Actors != nil ||
				!s.Filter.IncludeWorkerSessions || s.Since == nil || *s.Since != "evt_01HZ0000000000000000000000" || s.Snapshot {
				t.Fatalf("%+v", s)
			}
		}},
		{"subscribe filter omitted is preset:full", `{"type":"subscribe"}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Subscribe.Preset != protocol.PresetFull {
				t.Fatalf("%+v", f.Subscribe)
			}
		}},
		{"subscribe filter null is preset:full", `{"type":"subscribe","filter":null,"since":null}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Subscribe.Preset != protocol.PresetFull || f.Subscribe.Since != nil {
				t.Fatalf("%+v", f.Subscribe)
			}
		}},
		{"subscribe with actors", `{"type":"subscribe","filter":{"actors":["model","tool"]}}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Subscribe.Filter.EventTypes != nil || !slices.Equal(f.Subscribe.Filter.Actors, []string{"model", "tool"}) {
				t.Fatalf("%+v", f.Subscribe)
			}
		}},
		{"cancel", `{"type":"cancel","turn_id":"turn_1","reason":"user_cancel"}`, func(t *testing.T, f protocol.ClientFrame) {
			if *f.Cancel != (protocol.Cancel{TurnID: "turn_1", Reason: "user_cancel"}) {
				t.Fatalf("%+v", f.Cancel)
			}
		}},
		{"cancel without reason", `{"type":"cancel","turn_id":"t"}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Cancel.TurnID != "t" || f.Cancel.Reason != "" {
				t.Fatalf("%+v", f.Cancel)
			}
		}},
		{"ping", `{"type":"ping","nonce":"n1"}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Ping.Nonce != "n1" {
				t.Fatalf("%+v", f.Ping)
			}
		}},
		{"pong", `{"type":"pong","nonce":"srv-3"}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Pong.Nonce != "srv-3" {
				t.Fatalf("%+v", f.Pong)
			}
		}},
		{"ping without nonce", `{"type":"ping"}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Ping.Nonce != "" {
				t.Fatalf("%+v", f.Ping)
			}
		}},
		{"unknown fields ignored", `{"type":"ping","nonce":"n","future":{"a":[1,2,{"b":null}]}}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Ping.Nonce != "n" {
				t.Fatalf("%+v", f.Ping)
			}
		}},
		{"surrounding whitespace", " \t\r\n{\"type\":\"pong\",\"nonce\":\"x\"} \n", func(t *testing.T, f protocol.ClientFrame) {
			if f.Pong.Nonce != "x" {
				t.Fatalf("%+v", f.Pong)
			}
		}},
		{"limits exactly", `{"type":"cancel","turn_id":"` + strings.Repeat("t", protocol.MaxTurnID) + `","reason":"` + strings.Repeat("r", protocol.MaxReason) + `"}`, func(t *testing.T, f protocol.ClientFrame) {
			if len(f.Cancel.TurnID) != protocol.MaxTurnID || len(f.Cancel.Reason) != protocol.MaxReason {
				t.Fatalf("%+v", f.Cancel)
			}
		}},
		{"nonce at its limit", `{"type":"ping","nonce":"` + strings.Repeat("n", protocol.MaxNonce) + `"}`, func(t *testing.T, f protocol.ClientFrame) {
			if len(f.Ping.Nonce) != protocol.MaxNonce {
				t.Fatal(len(f.Ping.Nonce))
			}
		}},
		{"since at its limit", `{"type":"subscribe","since":"` + strings.Repeat("s", protocol.MaxCursor) + `"}`, func(t *testing.T, f protocol.ClientFrame) {
			if len(*f.Subscribe.Since) != protocol.MaxCursor {
				t.Fatal(*f.Subscribe.Since)
			}
		}},
		{"filter items at the limit", `{"type":"subscribe","filter":{"event_types":[` + strings.TrimSuffix(strings.Repeat(`"text.delta",`, protocol.MaxFilterItems), ",") + `]}}`, func(t *testing.T, f protocol.ClientFrame) {
			if len(f.Subscribe.Filter.EventTypes) != protocol.MaxFilterItems {
				t.Fatal(len(f.Subscribe.Filter.EventTypes))
			}
		}},
		{"escaped unicode", `{"type":"ping","nonce":"\u00e9\ud83d\ude00"}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Ping.Nonce != "é😀" {
				t.Fatalf("%q", f.Ping.Nonce)
			}
		}},
		{"duplicate keys: the last wins", `{"type":"ping","nonce":"a","nonce":"b"}`, func(t *testing.T, f protocol.ClientFrame) {
			if f.Ping.Nonce != "b" {
				t.Fatalf("%q", f.Ping.Nonce)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := protocol.DecodeClientFrame([]byte(tt.in))
			if err != nil {
				t.Fatalf("DecodeClientFrame(%s): %v", tt.in, err)
			}
			checkFrameShape(t, f)
			tt.check(t, f)
		})
	}
}

func TestDecodeClientFrameInvalid(t *testing.T) {
	big := `{"type":"ping","nonce":"` + strings.Repeat("x", protocol.MaxClientFrame) + `"}`
	tests := []struct {
		name, in, code string
	}{
		{"empty", ``, protocol.CodeInvalidJSON},
		{"whitespace", "  \n", protocol.CodeInvalidJSON},
		{"not json", `hello`, protocol.CodeInvalidJSON},
		{"array", `[{"type":"ping"}]`, protocol.CodeInvalidJSON},
		{"string", `"ping"`, protocol.CodeInvalidJSON},
		{"number", `5`, protocol.CodeInvalidJSON},
		{"null", `null`, protocol.CodeInvalidJSON},
		{"truncated", `{"type":"ping"`, protocol.CodeInvalidJSON},
		{"invalid utf-8", "{\"type\":\"ping\",\"nonce\":\"\xff\"}", protocol.CodeInvalidJSON},
		{"trailing object", `{"type":"ping"} {}`, protocol.CodeInvalidJSON},
		{"trailing brace", `{"type":"ping"}}`, protocol.CodeInvalidJSON},
		{"trailing bracket", `{"type":"ping"}]`, protocol.CodeInvalidJSON},
		{"trailing garbage", `{"type":"ping"}x`, protocol.CodeInvalidJSON},
		{"trailing nul", "{\"type\":\"ping\"}\x00", protocol.CodeInvalidJSON},
		{"type not a string", `{"type":5}`, protocol.CodeInvalidJSON},
		{"deep nesting", `{"type":"ping","x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, protocol.CodeInvalidJSON},
		{"too big", big, protocol.CodeInvalidFrame},
		{"no type", `{"nonce":"x"}`, protocol.CodeInvalidFrame},
		{"empty type", `{"type":""}`, protocol.CodeInvalidFrame},
		{"null type", `{"type":null}`, protocol.CodeInvalidFrame},
		{"unknown type", `{"type":"subscribe_ack"}`, protocol.CodeUnknownFrameType},
		{"unknown long type", `{"type":"` + strings.Repeat("é", 100) + `"}`, protocol.CodeUnknownFrameType},
		{"filter number", `{"type":"subscribe","filter":5}`, protocol.CodeInvalidFrame},
		{"filter array", `{"type":"subscribe","filter":["text.delta"]}`, protocol.CodeInvalidFrame},
		{"filter bool", `{"type":"subscribe","filter":true}`, protocol.CodeInvalidFrame},
		{"filter empty preset name", `{"type":"subscribe","filter":""}`, protocol.CodeInvalidFrame},
		{"filter empty preset name, spaced", `{"type":"subscribe","filter": "" }`, protocol.CodeInvalidFrame},
		{"event_types not strings", `{"type":"subscribe","filter":{"event_types":[1]}}`, protocol.CodeInvalidFrame},
		{"event_types object", `{"type":"subscribe","filter":{"event_types":{}}}`, protocol.CodeInvalidFrame},
		{"too many types", `{"type":"subscribe","filter":{"event_types":[` + strings.TrimSuffix(strings.Repeat(`"text.delta",`, protocol.MaxFilterItems+1), ",") + `]}}`, protocol.CodeInvalidFrame},
		{"too many actors", `{"type":"subscribe","filter":{"actors":[` + strings.TrimSuffix(strings.Repeat(`"a",`, protocol.MaxFilterItems+1), ",") + `]}}`, protocol.CodeInvalidFrame},
		{"since empty", `{"type":"subscribe","since":""}`, protocol.CodeInvalidFrame},
		{"since too long", `{"type":"subscribe","since":"` + strings.Repeat("s", protocol.MaxCursor+1) + `"}`, protocol.CodeInvalidFrame},
		{"since number", `{"type":"subscribe","since":12}`, protocol.CodeInvalidFrame},
		{"snapshot string", `{"type":"subscribe","snapshot":"yes"}`, protocol.CodeInvalidFrame},
		{"snapshot huge number", `{"type":"subscribe","snapshot":1e999}`, protocol.CodeInvalidFrame},
		{"cancel without turn", `{"type":"cancel"}`, protocol.CodeInvalidFrame},
		{"cancel empty turn", `{"type":"cancel","turn_id":""}`, protocol.CodeInvalidFrame},
		{"cancel turn too long", `{"type":"cancel","turn_id":"` + strings.Repeat("t", protocol.MaxTurnID+1) + `"}`, protocol.CodeInvalidFrame},
		{"cancel reason too long", `{"type":"cancel","turn_id":"t","reason":"` + strings.Repeat("r", protocol.MaxReason+1) + `"}`, protocol.CodeInvalidFrame},
		{"cancel turn number", `{"type":"cancel","turn_id":1e400}`, protocol.CodeInvalidFrame},
		{"nonce too long", `{"type":"pong","nonce":"` + strings.Repeat("n", protocol.MaxNonce+1) + `"}`, protocol.CodeInvalidFrame},
		{"nonce object", `{"type":"ping","nonce":{}}`, protocol.CodeInvalidFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := protocol.DecodeClientFrame([]byte(tt.in))
			if err == nil {
				t.Fatalf("accepted: %+v", f)
			}
			var de *protocol.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecodeError", err, err)
			}
			if de.Code != tt.code || de.Message == "" {
				t.Fatalf("code %q (%s), want %q", de.Code, de.Message, tt.code)
			}
			if len(de.Message) > 1024 {
				t.Fatalf("message of %d bytes", len(de.Message))
			}
			if f.Type != "" || f.Subscribe != nil || f.Cancel != nil || f.Ping != nil || f.Pong != nil {
				t.Fatalf("refused frame is not zero: %+v", f)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	full, chat := presetNames(protocol.PresetFull), presetNames(protocol.PresetChat)
	tests := []struct {
		name      string
		sub       protocol.Subscribe
		types     []string // nil: refused
		offending string
	}{
		{"preset chat", protocol.Subscribe{Preset: protocol.PresetChat}, chat, ""},
		{"preset full", protocol.Subscribe{Preset: protocol.PresetFull}, full, ""},
		{"preset wins over filter", protocol.Subscribe{Preset: protocol.PresetChat, Filter: protocol.Filter{EventTypes: []string{"x"}}}, chat, ""},
		{"no filter is every type", protocol.Subscribe{}, full, ""},
		{"explicit, both families", protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{"text.delta", "route.decided"}}}, []string{"text.delta", "route.decided"}, ""},
		{"duplicates dropped, order kept", protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{"turn.started", "text.delta", "turn.started", "text.delta"}}}, []string{"turn.started", "text.delta"}, ""},
		{"unknown type", protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{"text.delta", "made.up.thing"}}}, nil, "made.up.thing"},
		{"empty type", protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{""}}}, nil, ""},
		{"case matters", protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{"Text.Delta"}}}, nil, "Text.Delta"},
		{"empty type list", protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{}}}, nil, ""},
		{"unknown preset", protocol.Subscribe{Preset: "preset:nope"}, nil, "preset:nope"},
		{"actors kept", protocol.Subscribe{Filter: protocol.Filter{Actors: []string{"model"}}}, full, ""},
		{"empty actor list", protocol.Subscribe{Filter: protocol.Filter{Actors: []string{}}}, nil, ""},
		{"empty actor", protocol.Subscribe{Filter: protocol.Filter{Actors: []string{""}}}, nil, ""},
		{"nul in actor", protocol.Subscribe{Filter: protocol.Filter{Actors: []string{"a\x00b"}}}, nil, "a\x00b"},
		{"long actor", protocol.Subscribe{Filter: protocol.Filter{Actors: []string{strings.Repeat("a", 65)}}}, nil, strings.Repeat("a", 64) + "…"},
		{"long unknown type", protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{strings.Repeat("é", 100)}}}, nil, strings.Repeat("é", 64) + "…"},
		{"long unknown preset", protocol.Subscribe{Preset: strings.Repeat("p", 10000)}, nil, strings.Repeat("p", 128) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := tt.sub.Resolve()
			if tt.types == nil {
				var fe *protocol.FilterError
				if !errors.As(err, &fe) {
					t.Fatalf("Resolve = %+v, %v; want a *FilterError", f, err)
				}
				if fe.Offending != tt.offending || fe.Message == "" {
					t.Fatalf("offending %q (%s), want %q", fe.Offending, fe.Message, tt.offending)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if !slices.Equal(f.EventTypes, tt.types) {
				t.Fatalf("types %v, want %v", f.EventTypes, tt.types)
			}
			if !slices.Equal(f.Actors, tt.sub.Filter.Actors) || f.IncludeWorkerSessions != tt.sub.Filter.IncludeWorkerSessions {
				t.Fatalf("resolved %+v from %+v", f, tt.sub)
			}
		})
	}
}

// TestDecodeThenResolve: what a client sends, through both steps.
func TestDecodeThenResolve(t *testing.T) {
	tests := []struct {
		in        string
		types     []string // nil: Resolve refuses
		offending string
	}{
		{`{"type":"subscribe","filter":"preset:chat"}`, presetNames(protocol.PresetChat), ""},
		{`{"type":"subscribe","filter":"preset:full"}`, presetNames(protocol.PresetFull), ""},
		{`{"type":"subscribe"}`, presetNames(protocol.PresetFull), ""},
		{`{"type":"subscribe","filter":{}}`, presetNames(protocol.PresetFull), ""},
		{`{"type":"subscribe","filter":{"event_types":null}}`, presetNames(protocol.PresetFull), ""},
		{`{"type":"subscribe","filter":{"event_types":["text.delta"]}}`, []string{"text.delta"}, ""},
		{`{"type":"subscribe","filter":"preset:bogus"}`, nil, "preset:bogus"},
		{`{"type":"subscribe","filter":{"event_types":[]}}`, nil, ""},
		{`{"type":"subscribe","filter":{"actors":[]}}`, nil, ""},
		{`{"type":"subscribe","filter":{"event_types":["made.up.thing"]}}`, nil, "made.up.thing"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			f, err := protocol.DecodeClientFrame([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			r, err := f.Subscribe.Resolve()
			if tt.types == nil {
				var fe *protocol.FilterError
				if !errors.As(err, &fe) || fe.Offending != tt.offending {
					t.Fatalf("Resolve = %+v, %v; want offending %q", r, err, tt.offending)
				}
				return
			}
			if err != nil || !slices.Equal(r.EventTypes, tt.types) {
				t.Fatalf("Resolve = %+v, %v", r, err)
			}
		})
	}
}

// TestCloseReasons: every close reason fits a close frame.
func TestCloseReasons(t *testing.T) {
	for _, r := range []protocol.CloseReason{protocol.ReasonClientTooSlow, protocol.ReasonHeartbeatTimeout,
		protocol.ReasonSubscribeTimeout, protocol.ReasonShutdown, protocol.ReasonWriteTimeout, protocol.ReasonStorageFailure,
		protocol.ReasonResync, protocol.ReasonOwnerChanged, {Code: "x", Message: strings.Repeat("m", 500)}} {
		enc := r.Encode()
		var back protocol.CloseReason
		if len(enc) > 123 || json.Unmarshal([]byte(enc), &back) != nil || back.Code != r.Code {
			t.Fatalf("%+v encodes as %q", r, enc)
		}
	}
}

// TestEventFrame: the frame wraps the envelope bytes unchanged.
func TestEventFrame(t *testing.T) {
	env := []byte(`{"id":"evt_1","type":"text.delta","session_id":"s","turn_id":null,"ts":"t","actor":"model","payload":{}}`)
	var f struct {
		Type  string          `json:"type"`
		Event json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(protocol.EventFrame(env), &f); err != nil || f.Type != protocol.TypeEvent || string(f.Event) != string(env) {
		t.Fatalf("%s: %v", protocol.EventFrame(env), err)
	}
}
