package hub_test

import (
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// TestLostEventResyncsClients: when an event of the session cannot be
// committed, every attached client is closed for resync (its queue is
// dropped and it reads as overflown, which the transport turns into a
// close that makes the client reconnect with its cursor); resubscribing
// from the last event it had replays exactly what the store holds, the
// lost event excepted.
func TestLostEventResyncsClients(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{})
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull})
	first := e.mustEmit(event.TurnStarted, event.ActorUser, "turn_1")
	e.barrier()
	items, overflown := att.Client.Drain(nil)
	if overflown || len(items) == 0 {
		t.Fatalf("before the fault: %d items, overflown %v", len(items), overflown)
	}
	st.SetFault(store.FailMatching(2, func(ops []store.Op) bool { return store.HasEvent(ops, event.RouteDecided) }))
	lost := e.mustEmit(event.RouteDecided, event.ActorRouter, "turn_1")
	e.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
	end := e.mustEmit(event.TurnCompleted, event.ActorAgent, "turn_1")
	e.barrier()
	st.SetFault(nil)
	if _, overflown := att.Client.Drain(nil); !overflown {
		t.Fatal("the client was not told to resync")
	}
	since := first.ID
	again := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &since})
	var got []string
	for _, it := range again.Replay {
		got = append(got, it.ID)
		if it.ID == lost.ID {
			t.Fatal("the lost event was replayed")
		}
	}
	if len(got) == 0 || got[len(got)-1] != end.ID {
		t.Fatalf("replay after resync %v, want it to end with %s", got, end.ID)
	}
}
