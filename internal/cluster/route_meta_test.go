package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
)

// Meta implements cluster.Handler for the stand-in owner: it records
// the meta-event and answers with an id of its own.
func (h *turns) Meta(_ context.Context, tree string, req cluster.MetaRequest) (cluster.MetaReply, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, "meta "+req.SessionID+" "+req.Type+" "+string(req.Payload))
	return cluster.MetaReply{EventID: fmt.Sprintf("evt_%s_%d", h.node, len(h.log))}, nil
}

// TestMetaFromAnyNodeReachesTheOwner: a meta-event sent from a node
// that does not own the tree reaches the owner's handler, in the order
// sent, with its payload made canonical (compact, keys sorted); a bad
// one is refused with bad_request before the handler; once nobody
// serves the tree it fails with ErrNoOwner. The router reports kind
// meta with each result.
func TestMetaFromAnyNodeReachesTheOwner(t *testing.T) {
	s := startServer(t)
	cfg := cluster.LeaseConfig{TTL: time.Minute}
	a, b := newNode(t, s, "node-a", cfg), newNode(t, s, "node-b", cfg)
	var seen observed
	b.router.Observe(seen.add)
	tree := newSessionID()

	owner := newTurns("node-a")
	oa, serving := a.serve(t, tree, owner)

	send := []cluster.MetaRequest{
		{SessionID: tree, Type: string(event.BusSubscriberRegistered), Payload: json.RawMessage(`{"subscription_name":"stream-1@node-b"}`)},
		{SessionID: tree, Type: string(event.BusHandlerWarning), Payload: json.RawMessage("{\n \"subscription_name\": \"stream-1@node-b\",\n \"reason\": \"client_too_slow\", \"queue_events\": 1000}")},
		{SessionID: tree, Type: string(event.BusSubscriberUnregister), Payload: json.RawMessage(`{"subscription_name":"stream-1@node-b"}`)},
	}
	for _, req := range send {
		rep, err := b.router.Meta(ctx(t), tree, req)
		if err != nil || rep.EventID == "" {
			t.Fatalf("meta %s via node-b = %+v, %v", req.Type, rep, err)
		}
	}
	_, err := b.router.Meta(ctx(t), tree, cluster.MetaRequest{SessionID: tree, Type: string(event.TurnStarted), Payload: json.RawMessage(`{"subscription_name":"x"}`)})
	if !isBadRequest(err) {
		t.Fatalf("a turn.started as a meta-event: %v, want bad_request", err)
	}
	want := []string{
		"meta " + tree + ` bus.subscriber_registered {"subscription_name":"stream-1@node-b"}`,
		"meta " + tree + ` bus.handler_warning {"queue_events":1000,"reason":"client_too_slow","subscription_name":"stream-1@node-b"}`,
		"meta " + tree + ` bus.subscriber_unregistered {"subscription_name":"stream-1@node-b"}`,
	}
	if got := owner.calls(); !slices.Equal(got, want) {
		t.Fatalf("owner served\n %q\nwant\n %q", got, want)
	}

	if err := oa.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	serving.Stop()
	if _, err := b.router.Meta(ctx(t), tree, send[0]); !errors.Is(err, cluster.ErrNoOwner) {
		t.Fatalf("meta with no owner: %v, want ErrNoOwner", err)
	}
	wantSeen := []string{"meta ok", "meta ok", "meta ok", "meta refused", "meta no_owner"}
	if got := seen.list(); !slices.Equal(got, wantSeen) {
		t.Fatalf("observed %q, want %q", got, wantSeen)
	}
}

// TestDecodeMetaRequest: what a meta request must hold, and the
// canonical payload of one accepted.
func TestDecodeMetaRequest(t *testing.T) {
	ok := []struct{ body, payload string }{
		{`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":{"subscription_name":"stream-1@a"}}`,
			`{"subscription_name":"stream-1@a"}`},
		{`{"session_id":"sess_1","type":"bus.subscriber_unregistered","payload":{"subscription_name":"s","extra":[1,2.50,{"b":1,"a":"<"}]}}`,
			`{"extra":[1,2.50,{"a":"\u003c","b":1}],"subscription_name":"s"}`},
		{"{\"session_id\":\"sess_1\",\"type\":\"bus.handler_warning\",\"payload\":{\n\"reason\":\"client_too_slow\",\n\"subscription_name\":\"s\",\"queue_bytes\":12345678901234567890}}",
			`{"queue_bytes":12345678901234567890,"reason":"client_too_slow","subscription_name":"s"}`},
		{"{\"session_id\":\"sess_1\",\"type\":\"bus.subscriber_registered\",\"payload\":{\"subscription_name\":\"a\xffb\"}}",
			`{"subscription_name":"a` + "\ufffd" + `b"}`},
	}
	for _, c := range ok {
		r, err := cluster.DecodeMetaRequest([]byte(c.body))
		if err != nil || string(r.Payload) != c.payload {
			t.Errorf("%s: payload %s, %v; want %s", c.body, r.Payload, err, c.payload)
		}
	}
	long := strings.Repeat("x", 257)
	for _, body := range []string{
		`not json`,
		`null`,
		`{"session_id":"a.b","type":"bus.subscriber_registered","payload":{"subscription_name":"s"}}`,
		`{"session_id":"_owner","type":"bus.subscriber_registered","payload":{"subscription_name":"s"}}`,
		`{"session_id":"sess_1","type":"turn.started","payload":{"subscription_name":"s"}}`,
		`{"session_id":"sess_1","type":"","payload":{"subscription_name":"s"}}`,
		`{"session_id":"sess_1","type":"bus.subscriber_registered"}`,
		`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":null}`,
		`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":[]}`,
		`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":"s"}`,
		`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":{}}`,
		`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":{"subscription_name":7}}`,
		`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":{"subscription_name":""}}`,
		`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":{"subscription_name":"` + long + `"}}`,
		`{"session_id":"sess_1","type":"bus.handler_warning","payload":{"subscription_name":"s"}}`,
		`{"session_id":"sess_1","type":"bus.handler_warning","payload":{"subscription_name":"s","reason":""}}`,
		`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":{"subscription_name":"s","pad":"` + strings.Repeat("x", 64<<10) + `"}}`,
	} {
		_, err := cluster.DecodeMetaRequest([]byte(body))
		if !isBadRequest(err) {
			t.Errorf("%.120s: %v, want bad_request", body, err)
		}
	}
}

func FuzzDecodeMetaRequest(f *testing.F) {
	f.Add([]byte(`{"session_id":"sess_1","type":"bus.subscriber_registered","payload":{"subscription_name":"stream-1@a"}}`))
	f.Add([]byte(`{"session_id":"sess_1","type":"bus.subscriber_unregistered","payload":{"subscription_name":"s","x":[1,{"y":null}]}}`))
	f.Add([]byte(`{"session_id":"sess_1","type":"bus.handler_warning","payload":{"subscription_name":"s","reason":"client_too_slow","queue_events":1e3}}`))
	f.Add([]byte(`{"session_id":"a.b","type":"bus.handler_warning","payload":{}}`))
	f.Add([]byte(`{"session_id":"s","type":"bus.subscriber_registered","payload":{"subscription_name":"\ud800"}}`))
	f.Add([]byte(`{"session_id":"s","type":"bus.subscriber_registered","payload":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := cluster.DecodeMetaRequest(b)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("error %v is not a bad_request", err)
			}
			return
		}
		switch event.Type(r.Type) {
		case event.BusSubscriberRegistered, event.BusSubscriberUnregister, event.BusHandlerWarning:
		default:
			t.Fatalf("accepted type %q", r.Type)
		}
		if cluster.ValidToken(r.SessionID) != nil {
			t.Fatalf("accepted session %q", r.SessionID)
		}
		// The payload is one compact line of valid UTF-8, an object
		// naming the subscription, and decoding it again changes nothing.
		if !utf8.Valid(r.Payload) || strings.ContainsAny(string(r.Payload), "\n\r") {
			t.Fatalf("payload %q", r.Payload)
		}
		var p map[string]any
		if err := json.Unmarshal(r.Payload, &p); err != nil || p["subscription_name"] == "" {
			t.Fatalf("payload %s: %v", r.Payload, err)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := cluster.DecodeMetaRequest(again)
		if err != nil || string(r2.Payload) != string(r.Payload) || r2.Type != r.Type || r2.SessionID != r.SessionID {
			t.Fatalf("decoding %s again: %+v, %v", again, r2, err)
		}
	})
}
