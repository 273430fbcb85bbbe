package hub_test

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// forwarded records what a hub hands to Config.Forward.
type forwarded struct {
	mu  sync.Mutex
	got []forwardedMeta
}

type forwardedMeta struct {
	sessionID string
	typ       event.Type
	payload   []byte // as JSON
}

func (f *forwarded) forward(sessionID string, typ event.Type, payload map[string]any) {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, forwardedMeta{sessionID: sessionID, typ: typ, payload: b})
}

func (f *forwarded) list() []forwardedMeta {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// slowScenario attaches a client with a queue of 2 to e's session, lets
// it overflow, and detaches it: its registration, a client_too_slow
// warning and its unregistration, in that order.
func slowScenario(t *testing.T, e *env) *hub.Attachment {
	t.Helper()
	e.mustEmit(event.SessionCreated, event.ActorSession, "")
	e.barrier()
	c := e.subscribe(protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{string(event.ToolCalled)}}})
	for range 3 {
		e.mustEmit(event.ToolCalled, event.ActorAgent, "t")
	}
	e.barrier()
	if !c.Client.Overflown() {
		t.Fatalf("the client did not overflow")
	}
	e.h.Unsubscribe(c.Client)
	e.barrier()
	return c
}

// TestMetaEventsOfSessionsEmittedElsewhereAreForwarded: for a session
// the hub may not emit into (Emits false: in cluster mode, a tree
// another node owns), the subscription meta-events of its clients and
// a slow client's warning go to Forward, in order, with exactly the
// payloads the hub emits itself for a session it may emit into, and
// none is emitted here; with Node set, a client's name carries it.
func TestMetaEventsOfSessionsEmittedElsewhereAreForwarded(t *testing.T) {
	st := openStore(t)

	// Emitted here: the reference payloads.
	local := newEnv(t, st, hub.Config{ClientQueue: 2})
	lc := slowScenario(t, local)
	if !strings.HasPrefix(lc.Client.Name, "stream-") || strings.Contains(lc.Client.Name, "@") {
		t.Fatalf("single-node name %q", lc.Client.Name)
	}
	local.waitMeta(event.BusHandlerWarning, lc.Client.Name) // emitted asynchronously
	want := map[event.Type][]byte{}
	for _, typ := range []event.Type{event.BusSubscriberRegistered, event.BusHandlerWarning, event.BusSubscriberUnregister} {
		evs, err := st.Events(local.ctx, store.EventQuery{SessionIDs: []string{local.sid}, Types: []event.Type{typ}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s emitted here: %d, %v", typ, len(evs), err)
		}
		want[typ] = evs[0].Payload
	}

	var fw forwarded
	remote := newEnv(t, st, hub.Config{ClientQueue: 2, Node: "node-b", Forward: fw.forward,
		Emits: func(string) bool { return false }})
	rc := slowScenario(t, remote)
	if name := rc.Client.Name; name != "stream-1@node-b" {
		t.Fatalf("client name %q, want stream-1@node-b", name)
	}
	got := fw.list()
	if len(got) != 3 {
		t.Fatalf("forwarded %d meta-events, want 3: %+v", len(got), got)
	}
	for i, typ := range []event.Type{event.BusSubscriberRegistered, event.BusHandlerWarning, event.BusSubscriberUnregister} {
		g := got[i]
		if g.sessionID != remote.sid || g.typ != typ {
			t.Fatalf("forwarded #%d: %s of %s, want %s of %s", i, g.typ, g.sessionID, typ, remote.sid)
		}
		// The same payload but for the client's name.
		w := strings.Replace(string(want[typ]), `"`+lc.Client.Name+`"`, `"`+rc.Client.Name+`"`, 1)
		if string(g.payload) != w {
			t.Errorf("forwarded %s payload\n %s\nwant\n %s", typ, g.payload, w)
		}
	}
	evs, err := st.Events(remote.ctx, store.EventQuery{SessionIDs: []string{remote.sid},
		Types: []event.Type{event.BusSubscriberRegistered, event.BusHandlerWarning, event.BusSubscriberUnregister}})
	if err != nil || len(evs) != 0 {
		t.Fatalf("meta-events emitted by a hub that may not: %d, %v", len(evs), err)
	}
}
