package spectest_test

// Connection lifecycle beyond §11.1, over each transport: cleanup on
// disconnect (§3.6), shutdown (contract §1), and the write deadline.

import (
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// subscriptionNames lists the subscription_name of a session's stored
// meta-events of one type.
func subscriptionNames(t *testing.T, h *servertest.Harness, sid string, typ event.Type) []string {
	t.Helper()
	var out []string
	for _, e := range storedEvents(t, h, sid, typ) {
		out = append(out, streamtest.EventPayloadOf[streamtest.WarningPayload](t, e).SubscriptionName)
	}
	return out
}

// TestSpec3_6_DisconnectUnregisters: a subscribed client that goes away
// is detached and announced with bus.subscriber_unregistered under the
// name it registered with; a connection that never subscribed (the
// WebSocket's), or whose subscribe was refused, leaves no meta-events.
func TestSpec3_6_DisconnectUnregisters(t *testing.T) {
	streamtest.EachTransport(t, testDisconnectUnregisters)
}

func testDisconnectUnregisters(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()

	c, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	servertest.WaitFor(t, "registration", func() bool {
		return len(subscriptionNames(t, h, sid, event.BusSubscriberRegistered)) == 1
	})
	name := subscriptionNames(t, h, sid, event.BusSubscriberRegistered)[0]
	if h.Server.Hub.Clients(sid) != 1 {
		t.Fatalf("%d clients attached", h.Server.Hub.Clients(sid))
	}
	if ws, ok := c.(*streamtest.Client); ok {
		_ = ws.WS.Close(websocket.StatusNormalClosure, "bye")
	} else {
		c.Close()
	}
	servertest.WaitFor(t, "unregistration", func() bool {
		return slices.Equal(subscriptionNames(t, h, sid, event.BusSubscriberUnregister), []string{name})
	})
	if h.Server.Hub.Clients(sid) != 0 {
		t.Fatalf("%d clients attached after the disconnect", h.Server.Hub.Clients(sid))
	}

	refused := connect(t, tr, h, sid)
	subscribeErr(t, refused, "preset:nope", nil, false)
	refused.Close()
	if tr.Name == streamtest.WebSocket.Name {
		silent := streamtest.Attach(t, h.URL, sid)
		pingPong(t, silent, "never subscribes")
		silent.Close()
	}
	// A last client, dropped abruptly, marks the end.
	last, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	last.Close()
	servertest.WaitFor(t, "the last unregistration", func() bool {
		return len(subscriptionNames(t, h, sid, event.BusSubscriberUnregister)) == 2
	})
	reg := subscriptionNames(t, h, sid, event.BusSubscriberRegistered)
	unreg := subscriptionNames(t, h, sid, event.BusSubscriberUnregister)
	if len(reg) != 2 || !slices.Equal(reg, unreg) || reg[0] == reg[1] {
		t.Fatalf("registered %v, unregistered %v", reg, unreg)
	}
}

// TestShutdownFlushesAndCloses: on shutdown the turn in flight is
// cancelled with reason server_shutdown, every event of it reaches the
// attached client, and the stream then closes with 1001 and reason
// server_shutdown (on SSE, in the close event that ends the response).
func TestShutdownFlushesAndCloses(t *testing.T) {
	streamtest.EachTransport(t, testShutdownFlushesAndCloses)
}

func testShutdownFlushesAndCloses(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", demoDelay(2*time.Millisecond))
	sid := h.CreateSession()
	c, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	turn := h.Submit(sid, "/long 400")
	first := until(t, c, event.TextDelta, turn)

	stopped := make(chan struct{})
	go func() { defer close(stopped); h.Stop() }()
	frames := expectClose(t, c, protocol.CloseGoingAway, "server_shutdown")
	<-stopped

	evs := first
	for _, f := range frames {
		if f.Event == nil {
			t.Fatalf("unexpected %s before the close", f.Raw)
		}
		evs = append(evs, f.Event)
	}
	streamtest.SameIDs(t, "up to the close", evs, delivered(h, sid, "", "", streamtest.PresetTypes(event.PresetChat)))
	last := evs[len(evs)-1]
	if last.Type != string(event.TurnCancelled) {
		t.Fatalf("last event before the close: %s", last.Type)
	}
	if p := streamtest.PayloadOf[struct {
		Reason string `json:"reason"`
	}](t, last); p.Reason != "server_shutdown" {
		t.Fatalf("turn.cancelled reason %q", p.Reason)
	}
}

// TestWriteTimeoutDropsStalledClient: a client whose socket stops
// accepting data is dropped once a write has been stalled for the write
// timeout, even though its (large) queue never overflowed; the turn is
// not held up, and no client_too_slow warning is emitted.
func TestWriteTimeoutDropsStalledClient(t *testing.T) {
	streamtest.EachTransport(t, testWriteTimeoutDropsStalledClient)
}

func testWriteTimeoutDropsStalledClient(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", writeTimeout(300*time.Millisecond), clientQueue(100000))
	sid := h.CreateSession()
	stalled := streamtest.ConnectNarrow(t, tr, h.URL, sid)
	subscribeOn(t, stalled, "preset:chat", nil, false)
	servertest.WaitFor(t, "registration", func() bool {
		return len(subscriptionNames(t, h, sid, event.BusSubscriberRegistered)) == 1
	})
	name := subscriptionNames(t, h, sid, event.BusSubscriberRegistered)[0]

	turn := h.Submit(sid, "/long 300")
	h.WaitTurn(sid)
	servertest.WaitFor(t, "the stalled client to be dropped", func() bool {
		return slices.Contains(subscriptionNames(t, h, sid, event.BusSubscriberUnregister), name)
	})
	for _, e := range storedEvents(t, h, sid, event.BusHandlerWarning) {
		if p := streamtest.EventPayloadOf[streamtest.WarningPayload](t, e); p.SubscriptionName == name {
			t.Errorf("unexpected warning %s", e.Payload)
		}
	}

	// The client finds a prefix of the stream, then a connection torn
	// down without a close frame (or close event).
	var got []*protocol.EventEnvelope
	for {
		f, err := stalled.TryRead(readTimeout)
		if err != nil {
			if streamtest.CloseStatus(err) != -1 {
				t.Fatalf("want the connection torn down, got %v", err)
			}
			break
		}
		got = append(got, f.Event)
	}
	all := delivered(h, sid, "", firstDelivered(t, h, sid, event.TurnCompleted, turn).ID, streamtest.PresetTypes(event.PresetChat))
	if len(got) == 0 || len(got) >= len(all) {
		t.Fatalf("stalled client read %d of %d events", len(got), len(all))
	}
	streamtest.SameIDs(t, "stalled client's prefix", got, all[:len(got)])
}
