package spectest_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// overflowCloseBound is how long after its queue overflows a client that
// never reads may still be attached. The server gives it overflowGrace
// (300 ms); the bound leaves room for a loaded 2-core machine under the
// race detector, and is far below the write timeout (10 s by default)
// that used to be the only thing ending such a client.
const overflowCloseBound = 3 * time.Second

// TestSpec10_5_NeverReadingClientCutAtOverflow: a client that never
// reads fills its socket, then its queue; at the overflow the server
// closes it at once instead of waiting out the write timeout: its
// connection is gone and its queue released (the hub unregisters it)
// within overflowCloseBound of the client_too_slow warning, which its
// unregistration follows, and the close is counted as a slow-client
// close with its reason.
func TestSpec10_5_NeverReadingClientCutAtOverflow(t *testing.T) {
	streamtest.EachTransport(t, testNeverReadingClientCutAtOverflow)
}

func testNeverReadingClientCutAtOverflow(t *testing.T, tr streamtest.Transport) {
	// A delay between deltas: the queue then overflows because the
	// socket is full, not because a burst outran the writer.
	h := servertest.Start(t, "", clientQueue(20), demoDelay(300*time.Microsecond))
	sid := h.CreateSession()
	stalled := streamtest.ConnectNarrow(t, tr, h.URL, sid)
	subscribeOn(t, stalled, "preset:chat", nil, false)
	var name string
	servertest.WaitFor(t, "registration", func() bool {
		names := subscriptionNames(t, h, sid, event.BusSubscriberRegistered)
		if len(names) == 1 {
			name = names[0]
		}
		return len(names) == 1
	})

	h.Submit(sid, "/long 300")
	h.WaitTurn(sid)

	var overflowAt, goneAt time.Time
	var warned, gone string
	servertest.WaitFor(t, "the never-reading client to be unregistered", func() bool {
		for _, e := range storedEvents(t, h, sid, event.BusSubscriberUnregister) {
			if streamtest.EventPayloadOf[streamtest.WarningPayload](t, e).SubscriptionName == name {
				goneAt, gone = e.TS, e.ID
				return true
			}
		}
		return false
	})
	for _, e := range storedEvents(t, h, sid, event.BusHandlerWarning) {
		if p := streamtest.EventPayloadOf[streamtest.WarningPayload](t, e); p.SubscriptionName == name && p.Reason == "client_too_slow" {
			overflowAt, warned = e.TS, e.ID
		}
	}
	if overflowAt.IsZero() {
		t.Fatalf("no client_too_slow warning for %s", name)
	}
	// The warning says why the subscription ended: it comes first.
	if warned > gone {
		t.Fatalf("the client_too_slow warning %s of %s came after its unregistration %s", warned, name, gone)
	}
	took := goneAt.Sub(overflowAt)
	t.Logf("overflow to unregistered: %v", took)
	if took > overflowCloseBound {
		t.Fatalf("the never-reading client was released %v after its overflow; want within %v", took, overflowCloseBound)
	}

	m := h.Server.Metrics.Stream
	if n := value(t, m.SlowCloses); n != 1 {
		t.Errorf("slow-client closes: %v, want 1", n)
	}
	if n := value(t, m.Closes.WithLabelValues("client_too_slow")); n != 1 {
		t.Errorf("closes with reason client_too_slow: %v, want 1", n)
	}
	if n := value(t, m.Clients); n != 0 {
		t.Errorf("%v clients still counted", n)
	}
}

// value reads a counter or gauge.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	servertest.Must(t, c.Write(&m))
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("not a counter or gauge: %v", &m)
	return 0
}

// TestResyncClosesWithStorageFailure: when the hub resynchronises a
// session's clients (an event of the session could not be stored), each
// live client is closed with 1008 storage_failure, a reason of its own
// that makes it reconnect with its cursor; the close is counted under
// that reason, not as a slow-client close.
func TestResyncClosesWithStorageFailure(t *testing.T) {
	streamtest.EachTransport(t, testResyncClosesWithStorageFailure)
}

func testResyncClosesWithStorageFailure(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c, _, _ := attachSub(t, tr, h, sid, "preset:chat", nil, false)
	servertest.WaitFor(t, "registration", func() bool {
		return len(subscriptionNames(t, h, sid, event.BusSubscriberRegistered)) == 1
	})
	h.Server.Hub.Resync(sid)
	expectClose(t, c, 1008, protocol.ReasonStorageFailure.Code)
	m := h.Server.Metrics.Stream
	servertest.WaitFor(t, "the close to be counted", func() bool {
		return value(t, m.Closes.WithLabelValues(protocol.ReasonStorageFailure.Code)) == 1
	})
	if n := value(t, m.SlowCloses); n != 0 {
		t.Fatalf("%v slow-client closes counted for a storage failure", n)
	}
}
