package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

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
			catalogOnly := rapid.Bool().Draw(rt, fmt.Sprintf("catalogOnly%d", step))
			for _, tr := range streamtest.Transports {
				replayOnce(rt, t, h, tr, sid, since, catalogOnly, deltas)
			}
		}
	})
	got := replayCounts(t, h)
	if got["memory"] == 0 || got["store"]+got["mixed"] == 0 {
		t.Fatalf("replays by source %v: want some from memory and some reading the store", got)
	}
	t.Logf("replays by source: %v", got)
}

// replayOnce reconnects to sid with since over tr and checks the replay
// against the store (catalog events) and deltas (streaming events).
func replayOnce(rt fataler, t *testing.T, h *servertest.Harness, tr streamtest.Transport, sid, since string, catalogOnly bool, deltas map[string]*event.Event) {
	var filter any = event.PresetFull
	catalog := []string{string(event.ToolCalled), string(event.ToolCompleted), string(event.RouteDecided),
		string(event.BusSubscriberRegistered), string(event.BusSubscriberUnregister)}
	if catalogOnly {
		filter = protocol.Filter{EventTypes: catalog}
	}
	c := tr.Connect(t, h.URL, sid, nil)
	defer c.Close()
	c.Subscribe(filter, &since, false)
	f := c.Read(10 * time.Second)
	if f.Err != nil {
		if f.Err.Code == protocol.CodeReplayTooLarge {
			return // a cursor far back past the limit: nothing to compare
		}
		rt.Fatalf("%s: subscribe since %s: %s: %s", tr.Name, since, f.Err.Code, f.Err.Message)
	}
	if f.Ack == nil {
		rt.Fatalf("%s: want the ack, got %s", tr.Name, f.Raw)
	}
	seam := f.Ack.SeamEventID
	var got [][]byte
	for len(got) < f.Ack.ReplayEventCount {
		fr := c.Read(10 * time.Second)
		switch fr.Type {
		case protocol.TypePing, protocol.TypePong:
			continue
		case protocol.TypeEvent:
			got = append(got, fr.Raw)
		default:
			rt.Fatalf("%s: unexpected %s frame in the replay: %s", tr.Name, fr.Type, fr.Raw)
		}
	}
	stored, err := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, AfterID: since, UpToID: seam})
	if err != nil {
		rt.Fatal(err)
	}
	var want []*event.Event
	for _, ev := range stored {
		if !catalogOnly || slices.Contains(catalog, string(ev.Type)) {
			want = append(want, ev)
		}
	}
	if !catalogOnly {
		for id, ev := range deltas {
			if ev.SessionID == sid && id > since && id <= seam {
				want = append(want, ev)
			}
		}
	}
	slices.SortFunc(want, func(a, b *event.Event) int { return strings.Compare(a.ID, b.ID) })
	if len(got) != len(want) {
		rt.Fatalf("%s: since %s: %d events replayed (ack says %d), the store's answer has %d", tr.Name, since, len(got), f.Ack.ReplayEventCount, len(want))
	}
	for i, ev := range want {
		if frame := protocol.EventFrame(ev.JSON()); !bytes.Equal(got[i], frame) {
			rt.Fatalf("%s: since %s: event %d:\n got  %s\n want %s", tr.Name, since, i, got[i], frame)
		}
	}
}

// fataler is a *testing.T or a *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
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
	replayOnce(t, t, h, streamtest.Transports[0], sid, since, false, nil)
	if got := replayCounts(t, h); got["store"] != 1 || got["memory"] != 0 {
		t.Fatalf("first replay after a restart: replays by source %v, want one from the store", got)
	}
	emit(h, 5)
	stored, err = h.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}})
	if err != nil {
		t.Fatal(err)
	}
	replayOnce(t, t, h, streamtest.Transports[1], sid, stored[len(stored)-3].ID, false, nil)
	if got := replayCounts(t, h); got["memory"] != 1 {
		t.Fatalf("a replay of events committed since the restart: replays by source %v, want one from memory", got)
	}
}

var replaysLine = regexp.MustCompile(`(?m)^metis_stream_replays_total\{source="(\w+)"\} (\d+)`)

// replayCounts reads metis_stream_replays_total by source.
func replayCounts(t *testing.T, h *servertest.Harness) map[string]int {
	t.Helper()
	resp, err := http.Get(h.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range replaysLine.FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}
