package protocol_test

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/metis-agent/metis/protocol"
)

func ptr(s string) *string { return &s }

// TestDecodeSubscribeQuery: the SSE query decodes to the Subscribe the
// WebSocket's subscribe frame would carry.
func TestDecodeSubscribeQuery(t *testing.T) {
	cases := []struct {
		query, lastEventID string
		want               protocol.Subscribe
	}{
		{"", "", protocol.Subscribe{}},
		{"preset=chat", "", protocol.Subscribe{Preset: "preset:chat"}},
		{"preset=preset:full", "", protocol.Subscribe{Preset: "preset:full"}},
		{"preset=chat&include_worker_sessions=true", "", protocol.Subscribe{Preset: "preset:chat",
			Filter: protocol.Filter{IncludeWorkerSessions: true}}},
		{"types=text.delta,turn.completed", "", protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{"text.delta", "turn.completed"}}}},
		{"types=text.delta&types=turn.completed&actors=model", "", protocol.Subscribe{Filter: protocol.Filter{
			EventTypes: []string{"text.delta", "turn.completed"}, Actors: []string{"model"}}}},
		{"types=", "", protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{}}}},
		{"since=evt_01J&snapshot=false", "", protocol.Subscribe{Since: ptr("evt_01J")}},
		{"since=", "", protocol.Subscribe{}},
		{"snapshot=true", "", protocol.Subscribe{Snapshot: true}},
		{"snapshot", "", protocol.Subscribe{Snapshot: true}},
		{"snapshot=1&snapshot=1", "", protocol.Subscribe{Snapshot: true}},
		// Last-Event-ID overrides since, and snapshot: the client resumes.
		{"since=evt_A&snapshot=true&preset=chat", "evt_B", protocol.Subscribe{Since: ptr("evt_B"), Preset: "preset:chat"}},
		{"attach=x&unknown=1", "", protocol.Subscribe{}},
	}
	for _, c := range cases {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := protocol.DecodeSubscribeQuery(q, c.lastEventID)
		if err != nil || !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%q (Last-Event-ID %q): %+v, %v; want %+v", c.query, c.lastEventID, got, err, c.want)
		}
	}
}

// TestDecodeSubscribeQueryErrors: malformed parameters are refused with
// a QueryError naming the parameter.
func TestDecodeSubscribeQueryErrors(t *testing.T) {
	cases := []struct{ query, lastEventID, param string }{
		{"snapshot=maybe", "", "snapshot"},
		{"include_worker_sessions=yes", "", "include_worker_sessions"},
		{"since=evt_A&since=evt_B", "", "since"},
		{"preset=chat&preset=full", "", "preset"},
		{"preset=chat&types=text.delta", "", "preset"},
		{"preset=chat&actors=model", "", "preset"},
		{"since=" + strings.Repeat("x", protocol.MaxCursor+1), "", "since"},
		{"", strings.Repeat("x", protocol.MaxCursor+1), "since"},
		{"types=" + strings.Repeat("a,", protocol.MaxFilterItems) + "a", "", "types"},
		{"actors=" + strings.Repeat("a,", protocol.MaxFilterItems) + "a", "", "actors"},
	}
	for _, c := range cases {
		q, _ := url.ParseQuery(c.query)
		s, err := protocol.DecodeSubscribeQuery(q, c.lastEventID)
		var qe *protocol.QueryError
		if !errors.As(err, &qe) || qe.Param != c.param || qe.Message == "" {
			t.Errorf("%.60q: %+v, %v; want a QueryError about %s", c.query, s, err, c.param)
		}
	}
}

// TestSubscribeQueryResolves: a decoded query resolves like the frame:
// the preset keeps include_worker_sessions; an empty types list and an
// unknown type are invalid filters.
func TestSubscribeQueryResolves(t *testing.T) {
	q, _ := url.ParseQuery("preset=chat&include_worker_sessions=true")
	s, err := protocol.DecodeSubscribeQuery(q, "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Resolve()
	if err != nil || !f.IncludeWorkerSessions || len(f.EventTypes) == 0 {
		t.Fatalf("Resolve = %+v, %v", f, err)
	}
	for _, bad := range []string{"types=", "types=text.delta,nope", "types=text.delta,", "preset=nope"} {
		q, _ := url.ParseQuery(bad)
		s, err := protocol.DecodeSubscribeQuery(q, "")
		if err != nil {
			t.Fatalf("%s: %v", bad, err)
		}
		var fe *protocol.FilterError
		if _, err := s.Resolve(); !errors.As(err, &fe) {
			t.Errorf("%s: Resolve err %v, want a FilterError", bad, err)
		}
	}
}

// FuzzDecodeSubscribeQuery: any query and header decode without panic;
// an accepted one keeps the frame's limits, resolves without panic,
// and survives an encode/decode round trip unchanged.
func FuzzDecodeSubscribeQuery(f *testing.F) {
	for _, s := range []string{"", "preset=chat", "types=text.delta,turn.completed&actors=model,user",
		"since=evt_01JAAAAAAAAAAAAAAAAAAAAAAA&snapshot=true", "include_worker_sessions&snapshot=0",
		"types=&actors=", "preset=preset:preset:x", "since=a&since=a", "types=a,,b&types=c", "preset=%00", "snapshot=T&x=%zz"} {
		f.Add(s, "")
		f.Add(s, "evt_01JAAAAAAAAAAAAAAAAAAAAAAA")
	}
	f.Fuzz(func(t *testing.T, raw, lastEventID string) {
		q, _ := url.ParseQuery(raw) // the server reads r.URL.Query(), which drops what does not parse
		s, err := protocol.DecodeSubscribeQuery(q, lastEventID)
		if err != nil {
			var qe *protocol.QueryError
			if !errors.As(err, &qe) || qe.Param == "" || qe.Message == "" {
				t.Fatalf("%q: error %v is not a QueryError with a parameter and message", raw, err)
			}
			return
		}
		if s.Since != nil && (*s.Since == "" || len(*s.Since) > protocol.MaxCursor) {
			t.Fatalf("%q: since %q", raw, *s.Since)
		}
		if len(s.Filter.EventTypes) > protocol.MaxFilterItems || len(s.Filter.Actors) > protocol.MaxFilterItems {
			t.Fatalf("%q: %d types, %d actors", raw, len(s.Filter.EventTypes), len(s.Filter.Actors))
		}
		if lastEventID != "" && (s.Snapshot || s.Since == nil || *s.Since != lastEventID) {
			t.Fatalf("%q with Last-Event-ID %q: %+v", raw, lastEventID, s)
		}
		_, _ = s.Resolve()
		back, err := protocol.DecodeSubscribeQuery(protocol.EncodeSubscribeQuery(*s), "")
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Fatalf("%q: %+v encodes to %q, which decodes to %+v, %v", raw, s, protocol.EncodeSubscribeQuery(*s).Encode(), back, err)
		}
	})
}

// FuzzDecodeSubscribeRequest: a raw query that does not parse, or two
// Last-Event-ID values that differ, is a QueryError; otherwise the
// request decodes as its parsed query and header would.
func FuzzDecodeSubscribeRequest(f *testing.F) {
	for _, s := range []string{"", "preset=chat", "types=%zz", "preset=chat&x=%zz", "a;b", "since=evt_1&since=evt_1"} {
		f.Add(s, "", "")
		f.Add(s, "evt_01JAAAAAAAAAAAAAAAAAAAAAAA", "evt_01JAAAAAAAAAAAAAAAAAAAAAAA")
		f.Add(s, "evt_01JAAAAAAAAAAAAAAAAAAAAAAA", "evt_01JBBBBBBBBBBBBBBBBBBBBBBB")
	}
	f.Fuzz(func(t *testing.T, raw, id1, id2 string) {
		s, err := protocol.DecodeSubscribeRequest(raw, []string{id1, id2})
		q, perr := url.ParseQuery(raw)
		if perr != nil || id1 != id2 {
			var qe *protocol.QueryError
			if !errors.As(err, &qe) || qe.Param == "" || qe.Message == "" {
				t.Fatalf("%q with Last-Event-IDs %q, %q: %v, want a QueryError", raw, id1, id2, err)
			}
			return
		}
		want, werr := protocol.DecodeSubscribeQuery(q, id1)
		if (err == nil) != (werr == nil) || err == nil && !reflect.DeepEqual(s, want) {
			t.Fatalf("%q: %+v, %v; the parsed query decodes to %+v, %v", raw, s, err, want, werr)
		}
	})
}
