package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
)

// replayCatalog is the catalog-only filter of the replay windows'
// property tests: the types they emit, and the subscribe's own.
var replayCatalog = []string{string(event.ToolCalled), string(event.ToolCompleted), string(event.RouteDecided),
	string(event.BusSubscriberRegistered), string(event.BusSubscriberUnregister)}

// replayWindowLimit is the replay limit of TestReplayWindowEqualsStore's
// server, and so the most events a session's replay window holds.
const replayWindowLimit = 60

// TestReplayWindowEqualsStore: on a real server whose replay windows
// are small (a cap of a few kilobytes over two busy sessions, so
// windows are evicted whole and trimmed, and --replay-limit events per
// session), for random sequences of appends (catalog events of random
// sizes and streaming deltas, on both sessions) and cursors (inside a
// window, at the newest event, older than a window), a reconnecting
// client's replay, over the WebSocket and over SSE, is the store's
// answer byte for byte: every event frame is the stored event's bytes
// framed (or, for a delta, the delivered event's), in id order, exactly
// (since, seam], with replay_event_count right. Across the run the
// server served replays from memory and from the store, both.
func TestReplayWindowEqualsStore(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) {
		c.ReplayWindowBytes = 12 << 10
		c.ReplayLimit = replayWindowLimit
	})
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		sids := []string{h.CreateSession(), h.CreateSession()}
		ems := make([]*bus.Emitter, len(sids))
		for i, sid := range sids {
			em, err := h.Server.Bus.Emitter(ctx, sid)
			if err != nil {
				rt.Fatal(err)
			}
			ems[i] = em
		}
		deltas := map[string]*event.Event{} // streaming events emitted, by id
		for step := range rapid.IntRange(1, 8).Draw(rt, "steps") {
			for i := range rapid.IntRange(1, 40).Draw(rt, fmt.Sprintf("burst%d", step)) {
				k := rapid.IntRange(0, 1).Draw(rt, fmt.Sprintf("on%d.%d", step, i))
				typ := rapid.SampledFrom([]event.Type{event.ToolCalled, event.ToolCompleted, event.RouteDecided, event.TextDelta}).
					Draw(rt, fmt.Sprintf("type%d.%d", step, i))
				pad := strings.Repeat("x", rapid.IntRange(0, 700).Draw(rt, fmt.Sprintf("size%d.%d", step, i)))
				ev, err := ems[k].Emit(bus.Spec{Type: typ, Actor: event.ActorTool, TurnID: "turn_x", Payload: map[string]string{"pad": pad}})
				if err != nil {
					rt.Fatal(err)
				}
				if event.FamilyOf(typ) == event.Streaming {
					deltas[ev.ID] = ev
				}
			}
			for _, em := range ems {
				if err := em.Barrier(ctx); err != nil {
					rt.Fatal(err)
				}
			}
			sid := sids[0]
			stored, err := h.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}})
			if err != nil {
				rt.Fatal(err)
			}
			if len(stored) < 2 {
				continue
			}
			// Near the end (inside the window) more often than far back.
			back := rapid.IntRange(1, min(len(stored)-1, 3*replayWindowLimit)).Draw(rt, fmt.Sprintf("back%d", step))
			since := stored[len(stored)-back].ID
			var catalog []string // nil: preset:full
			if rapid.Bool().Draw(rt, fmt.Sprintf("catalogOnly%d", step)) {
				catalog = replayCatalog
			}
			for _, tr := range streamtest.Transports {
				h.CheckReplay(rt, tr, sid, since, catalog, deltas)
			}
		}
	})
	got := h.ReplayCounts()
	if got["memory"] == 0 || got["store"]+got["mixed"] == 0 {
		t.Fatalf("replays by source %v: want some from memory and some reading the store", got)
	}
	t.Logf("replays by source: %v", got)
}

// TestReplayWindowEmptyAfterRestart: the replay window is memory only:
// a restarted server holds no window, so its first replay reads the
// store (and is the store's answer), and the next one, of events
// committed since the restart, is served from memory again.
func TestReplayWindowEmptyAfterRestart(t *testing.T) {
	h := servertest.Start(t, "")
	ctx := context.Background()
	sid := h.CreateSession()
	emit := func(h *servertest.Harness, n int) {
		em, err := h.Server.Bus.Emitter(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := em.Emit(bus.Spec{Type: event.ToolCalled, Actor: event.ActorTool, TurnID: "turn_x", Payload: map[string]string{"pad": "x"}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := em.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
	}
	emit(h, 20)
	if h.Server.Hub.WindowBytes() == 0 {
		t.Fatal("no replay window before the restart")
	}
	h.Stop()

	h = servertest.Start(t, h.Home)
	if n := h.Server.Hub.WindowBytes(); n != 0 {
		t.Fatalf("a restarted server holds %d bytes of replay windows", n)
	}
	stored, err := h.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}})
	if err != nil {
		t.Fatal(err)
	}
	since := stored[len(stored)-10].ID
	h.CheckReplay(t, streamtest.Transports[0], sid, since, nil, nil)
	if got := h.ReplayCounts(); got["store"] != 1 || got["memory"] != 0 {
		t.Fatalf("first replay after a restart: replays by source %v, want one from the store", got)
	}
	emit(h, 5)
	stored, err = h.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}})
	if err != nil {
		t.Fatal(err)
	}
	h.CheckReplay(t, streamtest.Transports[1], sid, stored[len(stored)-3].ID, nil, nil)
	if got := h.ReplayCounts(); got["memory"] != 1 {
		t.Fatalf("a replay of events committed since the restart: replays by source %v, want one from memory", got)
	}
}
