package hub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// TestSlowClient (spec §8): a client that is never drained overflows
// exactly when an event arrives with ClientQueue items queued; emitting
// never blocks on it; after the overflow Drain reports it and discards
// the queue, and every later event is dropped; one bus.handler_warning
// names the client (subscription_name) with reason client_too_slow and
// queue_capacity; a client of the same session that keeps up receives
// every event, the warning included. The slow client then reconnects
// with the last id it had and gets everything it missed.
func TestSlowClient(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		q := rapid.IntRange(4, 24).Draw(rt, "clientQueue")
		e := newEnv(rt, st, hub.Config{ClientQueue: q, RingSize: 1 << 10})
		e.mustEmit(event.SessionCreated, event.ActorSession, "")
		e.barrier()
		fast := e.subscribe(protocol.Subscribe{Preset: event.PresetFull})
		slowSub := protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{string(event.TextDelta), string(event.ToolCalled)}}}
		slow := e.subscribe(slowSub)
		e.barrier()
		var fastGot []*hub.Item
		fastGot = append(fastGot, drain(rt, fast)...)

		// Each emit is delivered before EmitWait returns, so the slow
		// queue's length is known exactly; the fast client is drained
		// after every event, as a writer keeping up would.
		n := rapid.IntRange(0, 3*q).Draw(rt, "events")
		var slowWant []string
		for i := range n {
			typ := rapid.SampledFrom([]event.Type{event.TextDelta, event.ToolCalled, event.RouteDecided}).Draw(rt, fmt.Sprintf("type%d", i))
			ev, err := e.em.EmitWait(e.ctx, bus.Spec{Type: typ, Actor: event.ActorAgent})
			if err != nil {
				rt.Fatalf("emit: %v", err)
			}
			if typ == event.TextDelta {
				e.mu.Lock()
				e.streaming = append(e.streaming, ev)
				e.mu.Unlock()
			}
			if typ != event.RouteDecided {
				slowWant = append(slowWant, ev.ID)
			}
			fastGot = append(fastGot, drain(rt, fast)...)
			if over := slow.Client.Overflown(); over != (len(slowWant) > q) {
				rt.Fatalf("after %d matching events into a queue of %d: overflown=%v", len(slowWant), q, over)
			}
			if !slow.Client.Overflown() && slow.Client.Len() != len(slowWant) {
				rt.Fatalf("slow queue holds %d, want %d", slow.Client.Len(), len(slowWant))
			}
		}
		overflowed := len(slowWant) > q
		var slowGot []*hub.Item
		if overflowed {
			items, over := slow.Client.Drain(nil)
			if !over || len(items) != 0 {
				rt.Fatalf("Drain after overflow: %d items, overflown=%v", len(items), over)
			}
			warns := e.waitMeta(event.BusHandlerWarning, slow.Client.Name)
			if len(warns) != 1 || warns[0]["reason"] != "client_too_slow" || warns[0]["queue_capacity"] != float64(q) {
				rt.Fatalf("warnings about %s: %v", slow.Client.Name, warns)
			}
			// Later events are dropped.
			e.mustEmit(event.TextDelta, event.ActorModel, "t")
			e.barrier()
			if items, over := slow.Client.Drain(nil); !over || len(items) != 0 || slow.Client.Len() != 0 {
				rt.Fatalf("overflown client queued %d more", len(items))
			}
			if got := len(e.metaEvents(event.BusHandlerWarning, slow.Client.Name)); got != 1 {
				rt.Fatalf("%d warnings about %s, want 1", got, slow.Client.Name)
			}
		} else {
			slowGot = drain(rt, slow)
			if !equalStrings(ids(slowGot), slowWant) {
				rt.Fatalf("slow client got %v, want %v", short(ids(slowGot)), short(slowWant))
			}
		}
		e.barrier()
		fastGot = append(fastGot, drain(rt, fast)...)
		all := e.all()
		sameEvents(rt, "fast client", fastGot, expect(all, matcher{preset: event.PresetFull}, fast.Seam, ""))
		if !overflowed && len(e.metaEvents(event.BusHandlerWarning, slow.Client.Name)) != 0 {
			rt.Fatalf("warning about a client that kept within its queue")
		}

		// The slow client is closed and reconnects with since: what it
		// had, or its seam if nothing. Nothing is lost.
		e.h.Unsubscribe(slow.Client)
		since := slow.Seam
		if len(slowGot) > 0 {
			since = slowGot[len(slowGot)-1].ID
		}
		slowSub.Since = &since
		again := e.subscribe(slowSub)
		m := matcher{types: slowSub.Filter.EventTypes}
		sameEvents(rt, "slow client after reconnect", append(slowGot, again.Replay...), expect(all, m, slow.Seam, again.Seam))
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSlowClientNeverBlocksEmit: with a one-item queue nobody drains,
// a burst of emits from several goroutines completes (bounded by a
// context), and the other client still gets all of it.
func TestSlowClientNeverBlocksEmit(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{ClientQueue: 1})
	stuck := e.subscribe(protocol.Subscribe{Preset: event.PresetFull})
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	done := make(chan error, 4)
	for range 4 {
		go func() {
			for range 200 {
				if _, err := e.emit(event.TextDelta, event.ActorModel, "t"); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("emits blocked behind a full client queue")
		}
	}
	e.barrier()
	if !stuck.Client.Overflown() {
		t.Fatal("no overflow")
	}
	e.waitMeta(event.BusHandlerWarning, stuck.Client.Name)
}

// TestUnsubscribe: Unsubscribe detaches the client (no more items, the
// client count drops once), emits one bus.subscriber_unregistered named
// after the client (after the bus.subscriber_registered of its
// subscribe), and is idempotent.
func TestUnsubscribe(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{})
	a := e.subscribe(protocol.Subscribe{Preset: event.PresetFull})
	b := e.subscribe(protocol.Subscribe{Preset: event.PresetFull})
	if a.Client.Name == b.Client.Name || a.Client.SessionID != e.sid {
		t.Fatalf("clients %q and %q of %s", a.Client.Name, b.Client.Name, a.Client.SessionID)
	}
	if e.h.Clients(e.sid) != 2 {
		t.Fatalf("%d clients", e.h.Clients(e.sid))
	}
	e.mustEmit(event.TextDelta, event.ActorModel, "t")
	e.barrier()
	for range 3 {
		e.h.Unsubscribe(a.Client)
	}
	if e.h.Clients(e.sid) != 1 {
		t.Fatalf("%d clients after unsubscribing one (three times)", e.h.Clients(e.sid))
	}
	if a.Client.Len() != 0 {
		t.Fatal("queue kept after unsubscribe")
	}
	e.mustEmit(event.TextDelta, event.ActorModel, "t")
	e.barrier()
	if items, _ := a.Client.Drain(nil); len(items) != 0 {
		t.Fatalf("unsubscribed client got %d items", len(items))
	}
	if got := e.metaEvents(event.BusSubscriberRegistered, a.Client.Name); len(got) != 1 {
		t.Fatalf("%d registered events", len(got))
	}
	if got := e.metaEvents(event.BusSubscriberUnregister, a.Client.Name); len(got) != 1 {
		t.Fatalf("%d unregistered events, want 1", len(got))
	}
	// b saw a's unregistration, after a's registration.
	all := e.all()
	sameEvents(t, "b", drain(t, b), expect(all, matcher{preset: event.PresetFull}, b.Seam, ""))
	// Unsubscribing a client of a session the hub never saw is harmless.
	e.h.Unsubscribe(b.Client)
	e.h.Unsubscribe(b.Client)
	if e.h.Clients(e.sid) != 0 || e.h.Clients("sess_unknown") != 0 {
		t.Fatal("clients left")
	}
}

// TestSlowClientByBytes: Config.ClientQueueBytes bounds a client's
// queue by bytes: with a generous event bound, an undrained client
// overflows once its frames' bytes would pass the byte bound, and the
// client_too_slow warning carries the queue's events and bytes at that
// moment with both bounds.
func TestSlowClientByBytes(t *testing.T) {
	st := openStore(t)
	const maxBytes = 4096
	e := newEnv(t, st, hub.Config{ClientQueue: 100000, ClientQueueBytes: maxBytes})
	slow := e.subscribe(protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{string(event.TextDelta)}}})
	e.barrier()
	sent := 0
	for !slow.Client.Overflown() {
		if sent > maxBytes {
			t.Fatalf("no overflow after %d events of at least one byte each", sent)
		}
		queued := slow.Client.Bytes()
		e.mustEmit(event.TextDelta, event.ActorModel, "t")
		e.barrier()
		sent++
		if !slow.Client.Overflown() && slow.Client.Bytes() > maxBytes {
			t.Fatalf("queue holds %d bytes, over the bound of %d (had %d)", slow.Client.Bytes(), maxBytes, queued)
		}
	}
	o, _ := slow.Client.Overflow()
	if o.Events != sent-1 || o.Bytes <= 0 || o.Bytes > maxBytes || o.Resync {
		t.Fatalf("overflow %+v after %d events", o, sent)
	}
	warns := e.waitMeta(event.BusHandlerWarning, slow.Client.Name)
	if len(warns) != 1 || warns[0]["queue_events"] != float64(o.Events) || warns[0]["queue_bytes"] != float64(o.Bytes) ||
		warns[0]["queue_capacity_bytes"] != float64(maxBytes) {
		t.Fatalf("warning %v, overflow %+v", warns, o)
	}
}

// TestClientQueueBytesDefault: a hub configured without a byte bound
// still bounds its clients' queues by bytes, with the default.
func TestClientQueueBytesDefault(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{ClientQueue: 1 << 30})
	a := e.subscribe(protocol.Subscribe{Preset: event.PresetFull})
	big := strings.Repeat("x", 1<<20)
	for range hub.DefaultClientQueueBytes>>20 + 2 {
		if _, err := e.em.EmitWait(e.ctx, bus.Spec{Type: event.TextDelta, Actor: event.ActorModel, Payload: map[string]string{"text": big}}); err != nil {
			t.Fatal(err)
		}
	}
	e.barrier()
	if o, ok := a.Client.Overflow(); !ok || o.Bytes > hub.DefaultClientQueueBytes {
		t.Fatalf("overflow %+v, %v with the default byte bound", o, ok)
	}
}

// TestSlowClientWarnedBeforeUnregistered: a slow client whose writer
// unsubscribes it the moment it is woken by the overflow (as the
// transports do, closing at once) is warned before it is unregistered:
// in the session's log its bus.handler_warning (client_too_slow)
// precedes its bus.subscriber_unregistered, every time.
func TestSlowClientWarnedBeforeUnregistered(t *testing.T) {
	st := openStore(t)
	for range 20 {
		e := newEnv(t, st, hub.Config{ClientQueue: 2, RingSize: 1 << 10})
		slow := e.subscribe(protocol.Subscribe{Preset: event.PresetFull})
		gone := make(chan struct{})
		go func() { // the client's writer
			defer close(gone)
			for range slow.Client.Notify() {
				if slow.Client.Overflown() {
					e.h.Unsubscribe(slow.Client)
					return
				}
			}
		}()
		for range 4 {
			e.mustEmit(event.TextDelta, event.ActorModel, "t")
		}
		<-gone
		e.barrier()
		evs, err := st.Events(e.ctx, store.EventQuery{SessionIDs: []string{e.sid},
			Types: []event.Type{event.BusHandlerWarning, event.BusSubscriberUnregister}})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || evs[0].Type != event.BusHandlerWarning || evs[1].Type != event.BusSubscriberUnregister {
			var got []event.Type
			for _, ev := range evs {
				got = append(got, ev.Type)
			}
			t.Fatalf("the slow client's meta-events in order: %v, want the warning, then the unregistration", got)
		}
	}
}
