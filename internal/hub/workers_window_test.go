package hub_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// TestIncludeWorkersOnARelayedTreeLosesNothing: a node that relays a
// tree written by another node (cluster mode: its feed hands the
// owner's events to bus.Relay, its projection stores the catalog ones
// first) gets a client that includes workers while a new worker's
// events are stored but not relayed yet. The subscribe makes the
// worker's emitter from the store; that must not move the tree's
// delivery point: the client's seam is the last relayed event, and
// every client of the tree, this one and those attached before, gets
// every relayed event after its seam, the planner's delta in between
// included.
func TestIncludeWorkersOnARelayedTreeLosesNothing(t *testing.T) {
	st := openStore(t)
	ctx := ctxT(t)
	// Not the tree's owner: no subscription meta-events.
	b, h := startHub(t, st, hub.Config{Emits: func(string) bool { return false }})

	// The owner's events, with its ids.
	seq, err := event.NewSequencer("", nil)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(sid string, typ event.Type, payload any) *event.Event {
		t.Helper()
		raw, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		id, ts := seq.Next()
		ev := &event.Event{ID: id, Type: typ, SessionID: sid, TS: ts, Actor: event.ActorSession, Payload: raw}
		if err := ev.Seal(); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	session := func(id, parent string) store.Session {
		return store.Session{ID: id, ParentSessionID: parent, WorkspacePath: "/work", ActiveModel: "test:model",
			RoutingPolicyVersion: "v1", CreatedAt: time.Now()}
	}
	relay := func(evs ...*event.Event) {
		t.Helper()
		for _, ev := range evs {
			if err := b.Relay(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	planner, worker := event.NewID("sess_"), event.NewID("sess_")

	// The node follows the planner's tree; the projection stored its
	// creation, the feed relayed it.
	p1 := mk(planner, event.SessionCreated, map[string]any{"parent_session_id": nil})
	if err := st.Apply(ctx, store.CreateSession{Session: session(planner, "")}, store.AppendEvent{Event: p1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Follow(ctx, planner); err != nil {
		t.Fatal(err)
	}
	relay(p1)
	withWorkers := subscribeTo(t, h, ctx, planner, true)
	plannerOnly := subscribeTo(t, h, ctx, planner, false)

	// The owner streams a delta of the planner (never stored), then
	// starts a worker; the projection stores the worker's events before
	// the feed relays any of them.
	delta := mk(planner, event.TextDelta, map[string]string{"text": "x"})
	w1 := mk(worker, event.SessionCreated, map[string]any{"parent_session_id": planner})
	w2 := mk(worker, event.TurnStarted, map[string]any{})
	p2 := mk(planner, event.DelegateStarted, map[string]any{})
	if err := st.Apply(ctx, store.CreateSession{Session: session(worker, planner)}, store.AppendEvent{Event: w1}); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(ctx, store.AppendEvent{Event: w2}, store.AppendEvent{Event: p2}); err != nil {
		t.Fatal(err)
	}

	// A client including workers subscribes in that window.
	late := subscribeTo(t, h, ctx, planner, true)
	if late.Seam != p1.ID {
		t.Fatalf("the seam of a client that subscribed before the feed relayed the worker is %s, want the last relayed event %s", late.Seam, p1.ID)
	}
	relay(delta, w1, w2, p2)

	all := []*event.Event{delta, w1, w2, p2}
	sameEvents(t, "a client with workers, attached before", drain(t, withWorkers), all)
	sameEvents(t, "a client of the planner only, attached before", drain(t, plannerOnly), []*event.Event{delta, p2})
	sameEvents(t, "the client with workers that subscribed in the window", drain(t, late), all)
}

// subscribeTo subscribes to a session with the full preset, with or
// without its workers, neither snapshot nor cursor.
func subscribeTo(t *testing.T, h *hub.Hub, ctx context.Context, sid string, workers bool) *hub.Attachment {
	t.Helper()
	sub := protocol.Subscribe{Preset: event.PresetFull, Filter: protocol.Filter{IncludeWorkerSessions: workers}}
	att, serr := h.Subscribe(ctx, sid, &sub)
	if serr != nil {
		t.Fatalf("subscribe to %s: %s: %s", sid, serr.Code, serr.Message)
	}
	if err := att.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	checkAttachment(t, att)
	return att
}
