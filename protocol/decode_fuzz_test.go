package protocol_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/metis-agent/metis/protocol"
)

// maxOffending bounds FilterError.Offending: 128 bytes of the entry and
// an ellipsis.
const maxOffending = 128 + len("…")

// decodeCodes are the error frame codes DecodeClientFrame may refuse with.
var decodeCodes = map[string]bool{protocol.CodeInvalidJSON: true, protocol.CodeInvalidFrame: true, protocol.CodeUnknownFrameType: true}

// checkFrameShape checks an accepted frame: a client frame type with
// exactly its pointer set, and every field within its limit.
func checkFrameShape(t testing.TB, f protocol.ClientFrame) {
	t.Helper()
	set := 0
	for _, p := range []bool{f.Subscribe != nil, f.Cancel != nil, f.Ping != nil, f.Pong != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		t.Fatalf("%d pointers set in %+v", set, f)
	}
	switch f.Type {
	case protocol.TypeSubscribe:
		s := f.Subscribe
		if s == nil {
			t.Fatalf("subscribe without Subscribe: %+v", f)
		}
		if s.Since != nil && (len(*s.Since) == 0 || len(*s.Since) > protocol.MaxCursor) {
			t.Fatalf("since of %d bytes", len(*s.Since))
		}
		if len(s.Filter.EventTypes) > protocol.MaxFilterItems || len(s.Filter.Actors) > protocol.MaxFilterItems {
			t.Fatalf("filter of %d types and %d actors", len(s.Filter.EventTypes), len(s.Filter.Actors))
		}
		if s.Preset != "" && !reflect.DeepEqual(s.Filter, protocol.Filter{}) {
			t.Fatalf("both a preset and a filter: %+v", s)
		}
	case protocol.TypeCancel:
		c := f.Cancel
		if c == nil {
			t.Fatalf("cancel without Cancel: %+v", f)
		}
		if c.TurnID == "" || len(c.TurnID) > protocol.MaxTurnID || len(c.Reason) > protocol.MaxReason {
			t.Fatalf("cancel %+v out of limits", c)
		}
	case protocol.TypePing, protocol.TypePong:
		h := f.Ping
		if f.Type == protocol.TypePong {
			h = f.Pong
		}
		if h == nil {
			t.Fatalf("%s without its heartbeat: %+v", f.Type, f)
		}
		if len(h.Nonce) > protocol.MaxNonce {
			t.Fatalf("nonce of %d bytes", len(h.Nonce))
		}
	default:
		t.Fatalf("accepted frame type %q", f.Type)
	}
}

// checkResolve checks Resolve on any subscribe: no panic; accepted
// filters name known, distinct types only, and keep the actors;
// refusals are *FilterError with a short Offending.
func checkResolve(t testing.TB, s *protocol.Subscribe) (protocol.Filter, bool) {
	t.Helper()
	f, err := s.Resolve()
	if err != nil {
		var fe *protocol.FilterError
		if !errors.As(err, &fe) {
			t.Fatalf("Resolve error %T %v", err, err)
		}
		if fe.Message == "" || fe.Error() != fe.Message {
			t.Fatalf("filter error %+v", fe)
		}
		if len(fe.Offending) > maxOffending {
			t.Fatalf("offending of %d bytes", len(fe.Offending))
		}
		if !utf8.ValidString(fe.Message) && utf8.ValidString(s.Preset) {
			t.Fatalf("message not UTF-8: %q", fe.Message)
		}
		return protocol.Filter{}, false
	}
	if len(f.EventTypes) == 0 {
		t.Fatalf("resolved to no types from %+v", s)
	}
	seen := map[string]bool{}
	for _, ty := range f.EventTypes {
		if !protocol.KnownEvent(protocol.EventType(ty)) {
			t.Fatalf("resolved unknown type %q", ty)
		}
		if seen[ty] {
			t.Fatalf("resolved %q twice", ty)
		}
		seen[ty] = true
	}
	if s.Preset == "" && !reflect.DeepEqual(f.Actors, s.Filter.Actors) {
		t.Fatalf("actors %v resolved to %v", s.Filter.Actors, f.Actors)
	}
	if f.Actors != nil && len(f.Actors) == 0 {
		t.Fatal("accepted an empty actor list")
	}
	for _, a := range f.Actors {
		if a == "" || len(a) > 64 {
			t.Fatalf("accepted actor %q", a)
		}
	}
	// Resolving a resolved filter changes nothing.
	again, err := (&protocol.Subscribe{Filter: f}).Resolve()
	if err != nil || !reflect.DeepEqual(again, f) {
		t.Fatalf("resolved filter %+v resolves to %+v, %v", f, again, err)
	}
	return f, true
}

// reencode writes an accepted frame back as canonical JSON.
func reencode(t testing.TB, f protocol.ClientFrame) []byte {
	t.Helper()
	var v any
	switch f.Type {
	case protocol.TypeSubscribe:
		s := f.Subscribe
		var filter any = s.Filter
		if s.Preset != "" {
			filter = s.Preset
		}
		v = map[string]any{"type": f.Type, "filter": filter, "since": s.Since, "snapshot": s.Snapshot}
	case protocol.TypeCancel:
		v = map[string]any{"type": f.Type, "turn_id": f.Cancel.TurnID, "reason": f.Cancel.Reason}
	case protocol.TypePing:
		v = map[string]any{"type": f.Type, "nonce": f.Ping.Nonce}
	case protocol.TypePong:
		v = map[string]any{"type": f.Type, "nonce": f.Pong.Nonce}
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-encode %+v: %v", f, err)
	}
	return b
}

// exported flattens a frame for comparing decodes by value.
type exported struct {
	Type      string
	Filter    protocol.Filter
	Preset    string
	Since     *string
	Snapshot  bool
	Cancel    *protocol.Cancel
	Ping      *protocol.Heartbeat
	Pong      *protocol.Heartbeat
	Subscribe bool
}

func export(f protocol.ClientFrame) exported {
	e := exported{Type: f.Type, Cancel: f.Cancel, Ping: f.Ping, Pong: f.Pong}
	if s := f.Subscribe; s != nil {
		e.Subscribe, e.Filter, e.Preset, e.Since, e.Snapshot = true, s.Filter, s.Preset, s.Since, s.Snapshot
	}
	return e
}

var seedFrames = []string{
	// Every valid kind.
	`{"type":"subscribe","filter":"preset:chat","since":null,"snapshot":true}`,
	`{"type":"subscribe","filter":"preset:full","since":null,"snapshot":false}`,
	`{"type":"subscribe","filter":{"event_types":["text.delta","tool.use_start","tool.use_input_delta","tool.use_end","tool.completed","route.decided","turn.started","turn.completed","turn.cancelled"],"actors":null,"include_worker_sessions":false},"since":null,"snapshot":true}`,
	`{"type":"subscribe","filter":{"event_types":["text.delta"],"actors":["model","tool"]},"since":"evt_01HZ8Q3W6G0000000000000000","snapshot":false}`,
	`{"type":"subscribe","filter":"preset:chat","since":"evt_01HZ8Q3W6G0000000000000000"}`,
	`{"type":"subscribe"}`,
	`{"type":"cancel","turn_id":"01HZ_xyz","reason":"user_cancel"}`,
	`{"type":"cancel","turn_id":"t"}`,
	`{"type":"ping","nonce":"n1"}`,
	`{"type":"pong","nonce":"srv-1"}`,
	`{"type":"ping"}`,
	// Tricky ones.
	`{"type":"subscribe","filter":5}`,
	`{"type":"subscribe","filter":null,"since":null,"snapshot":null}`,
	`{"type":"subscribe","filter":""}`,
	`{"type":"subscribe","filter":{"event_types":[],"actors":[]}}`,
	`{"type":"subscribe","filter":{"event_types":null,"actors":null}}`,
	`{"type":"subscribe","filter":{"event_types":["made.up.thing"]}}`,
	`{"type":"subscribe","filter":"preset:nope"}`,
	`{"type":"subscribe","filter":{"event_types":["text.delta","text.delta"]},"filter":"preset:chat"}`,
	`{"type":"ping","type":"cancel","turn_id":"t"}`,
	`{"TYPE":"PING","Nonce":"x"}`,
	`{"type":"ping","nonce":"a","nonce":"b"}`,
	`{"type":"subscribe","since":""}`,
	`{"type":"subscribe","snapshot":1e999}`,
	`{"type":"cancel","turn_id":123456789012345678901234567890}`,
	`{"type":"ping","nonce":"` + "\xff\xfe" + `"}`,
	`{"type":"ping","nonce":"\ud800"}`,
	`{"type":"ping"}}`,
	`{"type":"ping"}]`,
	`{"type":"ping"} {"type":"pong"}`,
	`{"type":"ping"}` + "\x00",
	` {"type":"pong"} `,
	`null`,
	`[]`,
	`"subscribe"`,
	`{"type":"ping","x":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
	`{"type":"ping","x":` + strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat("}", 64) + `}`,
	`{"type":"` + strings.Repeat("é", 40) + `"}`,
	`{"type":"subscribe","filter":{"actors":["` + strings.Repeat("a", 65) + `"]}}`,
	`{"type":"subscribe","filter":"` + strings.Repeat("p", 300) + `"}`,
	``,
	`{`,
}

// FuzzDecodeClientFrame: DecodeClientFrame never panics; an accepted
// frame is a client frame type with exactly its pointer set and every
// field within its limit, and decodes identically once re-encoded; a
// refusal is a *DecodeError with a documented code; and Resolve of any
// accepted subscribe keeps its own invariants.
func FuzzDecodeClientFrame(f *testing.F) {
	for _, s := range seedFrames {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := protocol.DecodeClientFrame(data)
		if err != nil {
			var de *protocol.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v", err, err)
			}
			if !decodeCodes[de.Code] || de.Message == "" || de.Error() == "" {
				t.Fatalf("refused with %+v", de)
			}
			if !reflect.DeepEqual(fr, protocol.ClientFrame{}) {
				t.Fatalf("refused frame is %+v", fr)
			}
			return
		}
		if !utf8.Valid(data) || len(data) > protocol.MaxClientFrame {
			t.Fatalf("accepted %d bytes of invalid UTF-8 or oversize input", len(data))
		}
		checkFrameShape(t, fr)
		again, err := protocol.DecodeClientFrame(reencode(t, fr))
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", reencode(t, fr), err)
		}
		if !reflect.DeepEqual(export(again), export(fr)) {
			t.Fatalf("decode of the re-encoding differs:\n %+v\n %+v", export(fr), export(again))
		}
		if fr.Subscribe != nil {
			r1, ok1 := checkResolve(t, fr.Subscribe)
			r2, ok2 := checkResolve(t, again.Subscribe)
			if ok1 != ok2 || !reflect.DeepEqual(r1, r2) {
				t.Fatalf("re-encoded subscribe resolves differently: %+v %v / %+v %v", r1, ok1, r2, ok2)
			}
		}
	})
}

// FuzzResolveFilter: Resolve of any subscribe (preset, explicit lists
// split on commas, nil or empty lists) never panics, accepts only known
// distinct types, and bounds what it echoes.
func FuzzResolveFilter(f *testing.F) {
	f.Add("", "text.delta,turn.started", "", false, true, false)
	f.Add("preset:chat", "", "", true, true, false)
	f.Add("preset:full", "", "", true, true, true)
	f.Add("", "", "", true, true, false)
	f.Add("", "", "", false, false, false)
	f.Add("preset:nope", "", "", true, true, false)
	f.Add("", "made.up.thing", "", false, true, false)
	f.Add("", "text.delta,text.delta,route.decided", "model,tool", false, false, false)
	f.Add("", "text.delta", ",", false, false, false)
	f.Add("", "text.delta", strings.Repeat("a", 65), false, false, false)
	f.Add("", strings.Repeat("é", 200), "", false, true, false)
	f.Add(strings.Repeat("\xff", 200), "", "", true, true, false)
	f.Add("", "text.delta", "a\x00b", false, false, false)
	f.Fuzz(func(t *testing.T, preset, types, actors string, nilTypes, nilActors, workers bool) {
		s := &protocol.Subscribe{Preset: preset, Filter: protocol.Filter{IncludeWorkerSessions: workers}}
		if !nilTypes {
			s.Filter.EventTypes = splitList(types)
		}
		if !nilActors {
			s.Filter.Actors = splitList(actors)
		}
		r, ok := checkResolve(t, s)
		if !ok {
			return
		}
		if preset == "" && s.Filter.EventTypes != nil {
			// Explicit lists keep their first-occurrence order.
			var want []string
			for _, ty := range s.Filter.EventTypes {
				if !contains(want, ty) {
					want = append(want, ty)
				}
			}
			if !reflect.DeepEqual(r.EventTypes, want) {
				t.Fatalf("types %v resolved to %v", s.Filter.EventTypes, r.EventTypes)
			}
		}
		if preset == "" && r.IncludeWorkerSessions != workers {
			t.Fatal("include_worker_sessions lost")
		}
	})
}

func splitList(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
