package clustertest_test

// The meta-events of a client of a node that does not own the client's
// tree (bus.subscriber_registered, bus.subscriber_unregistered, a slow
// client's bus.handler_warning): that node asks the tree's owner to
// emit them, or takes a tree nobody owns and emits them itself, so the
// tree's log holds them exactly as a single node's store would.

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// busTypes is a filter of the bus meta-events only.
var busTypes = protocol.Filter{EventTypes: []string{string(event.BusSubscriberRegistered),
	string(event.BusSubscriberUnregister), string(event.BusHandlerWarning)}}

// watchBus subscribes a WebSocket client of node h that gets the bus
// meta-events of a session, and nothing else.
func watchBus(t *testing.T, h *servertest.Harness, sid string) *streamtest.Client {
	t.Helper()
	c := streamtest.Attach(t, h.URL, sid)
	c.Subscribe(busTypes, nil, false)
	if f := c.Read(wait); f.Ack == nil {
		t.Fatalf("want subscribe_ack, got %s", f.Raw)
	}
	return c
}

// metaEvent is a bus meta-event as a client got it.
type metaEvent struct {
	ev      *protocol.EventEnvelope
	name    string
	payload map[string]any
}

// nextMeta reads c's next event, which must be a meta-event of type
// typ.
func nextMeta(t *testing.T, c streamtest.Conn, typ event.Type) metaEvent {
	t.Helper()
	f := nextFrame(t, c)
	if f.Event == nil || f.Event.Type != string(typ) {
		t.Fatalf("%s client: want a %s event, got %s", c.Transport(), typ, f.Raw)
	}
	m := metaEvent{ev: f.Event}
	servertest.Must(t, json.Unmarshal(f.Event.Payload, &m.payload))
	m.name, _ = m.payload["subscription_name"].(string)
	if f.Event.Actor != event.ActorBus || m.name == "" {
		t.Fatalf("%s client: meta-event %s", c.Transport(), f.Raw)
	}
	return m
}

// sameEvent fails unless two clients got the same event, byte for byte.
func sameEvent(t *testing.T, what string, got, want metaEvent) {
	t.Helper()
	g, _ := json.Marshal(got.ev)
	w, _ := json.Marshal(want.ev)
	if string(g) != string(w) {
		t.Fatalf("%s:\n %s\nwant\n %s", what, g, w)
	}
}

// storedOn waits until node h's store holds the events with these ids
// (its projection, on a node that does not own the tree), and checks
// that they are exactly those events.
func storedOn(t *testing.T, h *servertest.Harness, sid string, want ...metaEvent) {
	t.Helper()
	ids := make([]string, len(want))
	for i, m := range want {
		ids[i] = m.ev.ID
	}
	var got []*event.Event
	eventually(t, "node "+h.Config.Node+"'s store to hold the meta-events", func() bool {
		evs, err := h.Server.Store.Events(t.Context(), store.EventQuery{SessionIDs: []string{sid},
			Types: []event.Type{event.BusSubscriberRegistered, event.BusSubscriberUnregister, event.BusHandlerWarning}})
		servertest.Must(t, err)
		got = slices.DeleteFunc(evs, func(e *event.Event) bool { return !slices.Contains(ids, e.ID) })
		return len(got) == len(ids)
	})
	for i, e := range got {
		if e.ID != ids[i] || string(e.Type) != want[i].ev.Type || string(e.Payload) != string(want[i].ev.Payload) {
			t.Fatalf("node %s stored %s %s %s, want %s %s %s", h.Config.Node, e.ID, e.Type, e.Payload,
				want[i].ev.ID, want[i].ev.Type, want[i].ev.Payload)
		}
	}
}

// deliveredBy fails unless node h's bus delivered the event (the
// owner's ids, committed by it).
func deliveredBy(t *testing.T, h *servertest.Harness, sid string, m metaEvent) {
	t.Helper()
	eventually(t, "node "+h.Config.Node+" to deliver "+m.ev.ID, func() bool {
		return slices.ContainsFunc(h.Live.Events(sid), func(e *event.Event) bool { return e.ID == m.ev.ID })
	})
}

// TestMetaEventsOfANonOwnersClientsReachEveryNode: a client attached on
// a node that does not own its tree produces bus.subscriber_registered
// and, when it goes, bus.subscriber_unregistered, emitted by the owner
// (its ids, delivered by it), seen by the clients of both nodes in the
// same frames and stored in both nodes' stores. Subscription names
// carry the node, so the first client of each node is not
// "stream-1" on both.
func TestMetaEventsOfANonOwnersClientsReachEveryNode(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)

	watchA := watchBus(t, a, sid)
	regA := nextMeta(t, watchA, event.BusSubscriberRegistered) // its own
	watchB := watchBus(t, b, sid)
	regB := nextMeta(t, watchB, event.BusSubscriberRegistered) // its own, routed to node a
	sameEvent(t, "node a's client", nextMeta(t, watchA, event.BusSubscriberRegistered), regB)
	if !strings.HasSuffix(regA.name, "@node-a") || !strings.HasSuffix(regB.name, "@node-b") {
		t.Fatalf("subscription names %q (node a) and %q (node b), want them to name their node", regA.name, regB.name)
	}

	x := attach(t, b, sid)
	reg := nextMeta(t, watchA, event.BusSubscriberRegistered)
	sameEvent(t, "node b's client", nextMeta(t, watchB, event.BusSubscriberRegistered), reg)
	if !strings.HasSuffix(reg.name, "@node-b") || reg.name == regB.name {
		t.Fatalf("the client of node b was registered as %q (node b's first client: %q)", reg.name, regB.name)
	}
	x.Close()
	unreg := nextMeta(t, watchA, event.BusSubscriberUnregister)
	sameEvent(t, "node b's client", nextMeta(t, watchB, event.BusSubscriberUnregister), unreg)
	if unreg.name != reg.name || unreg.ev.ID <= reg.ev.ID {
		t.Fatalf("unregistered %s %q after registered %s %q", unreg.ev.ID, unreg.name, reg.ev.ID, reg.name)
	}

	for _, m := range []metaEvent{regB, reg, unreg} {
		deliveredBy(t, a, sid, m)
	}
	storedOn(t, a, sid, regB, reg, unreg)
	storedOn(t, b, sid, regB, reg, unreg)
	eventually(t, "node b to count its routed meta-events", func() bool {
		return metric(t, b, `metis_cluster_meta_events_total{result="routed"}`) == 3
	})
	for series, want := range map[string]float64{
		`metis_cluster_routed_requests_total{kind="meta",result="ok"}`: 3,
		`metis_cluster_meta_events_total{result="dropped"}`:            0,
		`metis_cluster_meta_events_total{result="failed"}`:             0,
		`metis_cluster_meta_events_total{result="local"}`:              0,
	} {
		if got := metric(t, b, series); got != want {
			t.Errorf("node b: %s = %v, want %v", series, got, want)
		}
	}
}

// TestSlowClientOfANonOwnerLeavesAWarning: a never-reading client of a
// node that does not own the tree is closed as too slow there, and the
// tree gets its bus.handler_warning (reason client_too_slow, with the
// queue's figures, as a single node emits it), between the client's
// registration and unregistration, seen by the clients of both nodes
// and stored in both nodes' stores.
func TestSlowClientOfANonOwnerLeavesAWarning(t *testing.T) {
	url := startNATS(t)
	start := func(name string) *servertest.Harness {
		return servertest.Start(t, "", func(c *config.Config) {
			c.NATS, c.Node, c.DemoDelay, c.ClientQueue = url, name, time.Millisecond, 200
		})
	}
	a, b := start("node-a"), start("node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	watchA := watchBus(t, a, sid)
	nextMeta(t, watchA, event.BusSubscriberRegistered)
	watchB := watchBus(t, b, sid)
	nextMeta(t, watchB, event.BusSubscriberRegistered)
	nextMeta(t, watchA, event.BusSubscriberRegistered)

	stalled := streamtest.ConnectNarrow(t, streamtest.WebSocket, b.URL, sid)
	subscribeOn(t, stalled, "preset:chat", nil, false)
	reg := nextMeta(t, watchA, event.BusSubscriberRegistered)
	sameEvent(t, "node b's client", nextMeta(t, watchB, event.BusSubscriberRegistered), reg)

	a.Submit(sid, "/long 200")
	a.WaitTurn(sid)
	warn := nextMeta(t, watchA, event.BusHandlerWarning)
	sameEvent(t, "node b's client", nextMeta(t, watchB, event.BusHandlerWarning), warn)
	if warn.name != reg.name || warn.payload["reason"] != protocol.ReasonClientTooSlow.Code || warn.payload["queue_capacity"] != float64(200) {
		t.Fatalf("warning %s, want client_too_slow about %s with a queue_capacity of 200", warn.ev.Payload, reg.name)
	}
	for _, k := range []string{"queue_capacity_bytes", "queue_events", "queue_bytes"} {
		if _, ok := warn.payload[k].(float64); !ok {
			t.Errorf("warning %s lacks %s", warn.ev.Payload, k)
		}
	}
	unreg := nextMeta(t, watchA, event.BusSubscriberUnregister)
	sameEvent(t, "node b's client", nextMeta(t, watchB, event.BusSubscriberUnregister), unreg)
	if unreg.name != reg.name {
		t.Fatalf("unregistered %q, want %q", unreg.name, reg.name)
	}
	if n := metric(t, b, `metis_stream_closes_total{reason="client_too_slow"}`); n != 1 {
		t.Fatalf("node b closed %v clients as too slow, want 1", n)
	}
	deliveredBy(t, a, sid, warn)
	storedOn(t, a, sid, reg, warn, unreg)
	storedOn(t, b, sid, reg, warn, unreg)
}

// TestMetaEventOfATreeNobodyOwnsTakesIt: a client attached on a node
// to a tree whose owner shut down (its lease released) finds no owner
// for its registration: the node takes the tree, as a routed request
// that finds no owner does, and emits it itself; the client gets it,
// and its unregistration is the node's own too.
func TestMetaEventOfATreeNobodyOwnsTakesIt(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	a.Stop()
	if holder := leaseHolder(t, url, sid); holder != "" {
		t.Fatalf("after node a stopped, the tree's lease is held by %q", holder)
	}

	x := watchBus(t, b, sid)
	reg := nextMeta(t, x, event.BusSubscriberRegistered)
	if !strings.HasSuffix(reg.name, "@node-b") {
		t.Fatalf("registered %q", reg.name)
	}
	if holder := leaseHolder(t, url, sid); holder != "node-b" {
		t.Fatalf("the tree's lease is held by %q, want node-b", holder)
	}
	deliveredBy(t, b, sid, reg)
	storedOn(t, b, sid, reg)
	if got := metric(t, b, `metis_cluster_meta_events_total{result="local"}`); got != 1 {
		t.Errorf("node b emitted %v meta-events itself, want 1", got)
	}
	if got := metric(t, b, `metis_cluster_meta_events_total{result="routed"}`); got != 0 {
		t.Errorf("node b routed %v meta-events, want 0", got)
	}

	x.Close()
	eventually(t, "node b to store the unregistration", func() bool {
		evs, err := b.Server.Store.Events(t.Context(), store.EventQuery{SessionIDs: []string{sid},
			Types: []event.Type{event.BusSubscriberUnregister}})
		servertest.Must(t, err)
		return len(evs) == 1 && strings.Contains(string(evs[0].Payload), `"`+reg.name+`"`) && evs[0].ID > reg.ev.ID
	})
}
