package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// refused subscribes and expects a subscribe_error with code; nothing
// may stay attached and no subscription meta-event may be emitted.
func (e *env) refused(sub protocol.Subscribe, code string) *protocol.SubscribeError {
	e.t.Helper()
	e.barrier()
	before := e.h.Clients(e.sid)
	metaBefore := e.countMeta()
	att, serr := e.h.Subscribe(e.ctx, e.sid, &sub)
	if serr == nil {
		e.t.Fatalf("subscribe %+v accepted (seam %s, %d replayed), want %s", sub, att.Seam, len(att.Replay), code)
	}
	if serr.Code != code || serr.Type != protocol.TypeSubscribeError || serr.Message == "" {
		e.t.Fatalf("subscribe %+v refused with %+v, want code %s", sub, serr, code)
	}
	if got := e.h.Clients(e.sid); got != before {
		e.t.Fatalf("refused subscribe left %d clients, had %d", got, before)
	}
	e.barrier()
	if got := e.countMeta(); got != metaBefore {
		e.t.Fatalf("refused subscribe emitted %d subscription meta-events", got-metaBefore)
	}
	return serr
}

func (e *env) countMeta() int {
	e.t.Helper()
	n, err := e.st.CountEvents(e.ctx, store.EventQuery{SessionIDs: []string{e.sid},
		Types: []event.Type{event.BusSubscriberRegistered, event.BusSubscriberUnregister}})
	if err != nil {
		e.t.Fatalf("count: %v", err)
	}
	return n
}

func ptr(s string) *string { return &s }

// TestSubscribeRefusals: each documented subscribe_error, and that a
// refused subscribe leaves nothing attached.
func TestSubscribeRefusals(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{})
	ev := e.mustEmit(event.SessionCreated, event.ActorSession, "")
	e.barrier()

	for _, since := range []string{"", "garbage", "evt_", "evt_8ZZZZZZZZZZZZZZZZZZZZZZZ", "evt_01HZZZZZZZZZZZZZZZZZZZZZZI", "evt_01hz", ev.ID + "x", strings.ToLower(ev.ID), "sess_" + ev.ID[4:]} {
		e.refused(protocol.Subscribe{Preset: event.PresetFull, Since: ptr(since)}, protocol.CodeInvalidCursor)
	}
	// snapshot: true ignores since altogether.
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: ptr("garbage"), Snapshot: true})
	e.h.Unsubscribe(att.Client)

	serr := e.refused(protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{"text.delta", "made.up.thing"}}}, protocol.CodeInvalidFilter)
	if serr.Offending != "made.up.thing" {
		t.Fatalf("offending %q", serr.Offending)
	}
	e.refused(protocol.Subscribe{Preset: "preset:nope"}, protocol.CodeInvalidFilter)
	e.refused(protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{}}}, protocol.CodeInvalidFilter)

	if _, serr := e.h.Subscribe(e.ctx, "sess_missing", &protocol.Subscribe{Preset: event.PresetFull}); serr == nil || serr.Code != protocol.CodeSessionNotFound {
		t.Fatalf("unknown session: %+v", serr)
	}
	if e.h.Clients("sess_missing") != 0 {
		t.Fatal("client attached to a missing session")
	}
}

// TestCursorRetention: with the clock injected, a cursor whose id time
// is older than Retention is cursor_expired and one within it replays.
func TestCursorRetention(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		retention := time.Duration(rapid.IntRange(1, 1000).Draw(rt, "retentionMS")) * time.Millisecond
		var now time.Time
		e := newEnv(rt, st, hub.Config{Retention: retention, Now: func() time.Time { return now }})
		ev := e.mustEmit(event.ToolCalled, event.ActorTool, "t")
		later := e.mustEmit(event.ToolCalled, event.ActorTool, "t")
		e.barrier()
		at, err := event.IDTime(ev.ID)
		if err != nil {
			rt.Fatal(err)
		}
		// The cursor is expired iff at < now - retention.
		ageMS := rapid.OneOf(rapid.IntRange(-5, 1005), rapid.SampledFrom([]int{0, -1, 1})).Draw(rt, "ageMS")
		if rapid.Bool().Draw(rt, "nearBoundary") {
			ageMS = int(retention/time.Millisecond) + rapid.IntRange(-1, 1).Draw(rt, "offset")
		}
		age := time.Duration(ageMS) * time.Millisecond
		now = at.Add(age)
		sub := protocol.Subscribe{Preset: event.PresetFull, Since: ptr(ev.ID)}
		if age > retention {
			e.refused(sub, protocol.CodeCursorExpired)
			return
		}
		att := e.subscribe(sub)
		if len(att.Replay) == 0 || att.Replay[0].ID != later.ID {
			rt.Fatalf("replay %v, want it to start with %s", ids(att.Replay), later.ID)
		}
	})
}

// TestReplayLimit: a replay of more than ReplayLimit matching events is
// refused with replay_too_large and leaves the client count unchanged;
// at or under the limit it is accepted with the exact count. With no
// actor filter the decision is exact; with one, the server counts by
// type only, so it may refuse early but never sends more than the limit.
func TestReplayLimit(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 12).Draw(rt, "limit")
		ringSize := rapid.SampledFrom([]int{0, 2, 1 << 10}).Draw(rt, "ring")
		e := newEnv(rt, st, hub.Config{ReplayLimit: limit, RingSize: ringSize})
		first := e.mustEmit(event.SessionCreated, event.ActorSession, "")
		// Someone else stays attached throughout.
		other := e.subscribe(protocol.Subscribe{Preset: event.PresetChat})
		for _, em := range rapid.SliceOfN(emissionGen(), 0, 30).Draw(rt, "events") {
			e.mustEmit(em.typ, em.actor, "t")
		}
		e.barrier()
		m := matcherGen().Draw(rt, "filter")
		sub := m.subscribe()
		sub.Since = &first.ID
		// What the replay would hold: matching catalog events and the
		// matching streaming events still in the ring.
		all := e.all()
		var streaming []*event.Event
		for _, ev := range all {
			if event.FamilyOf(ev.Type) == event.Streaming {
				streaming = append(streaming, ev)
			}
		}
		held := map[string]bool{}
		for _, ev := range streaming[max(0, len(streaming)-ringSize):] {
			held[ev.ID] = true
		}
		var want []*event.Event
		for _, ev := range expect(all, m, first.ID, "") {
			if event.FamilyOf(ev.Type) == event.Catalog || held[ev.ID] {
				want = append(want, ev)
			}
		}
		att, serr := e.h.Subscribe(e.ctx, e.sid, &sub)
		switch {
		case serr != nil && serr.Code != protocol.CodeReplayTooLarge:
			rt.Fatalf("refused with %+v", serr)
		case serr != nil && len(want) <= limit:
			rt.Fatalf("replay of %d refused with limit %d", len(want), limit)
		case serr != nil:
			if got := e.h.Clients(e.sid); got != 1 {
				rt.Fatalf("refused subscribe left %d clients, want 1", got)
			}
			e.barrier()
			if got := e.countMeta(); got != 1 { // other's registration only
				rt.Fatalf("%d subscription meta-events, want 1 (a refused subscribe emitted some)", got)
			}
		case len(want) > limit:
			rt.Fatalf("replay of %d accepted with limit %d", len(want), limit)
		default:
			if err := att.Collect(e.ctx); err != nil {
				rt.Fatal(err)
			}
			checkAttachment(rt, att)
			e.barrier()
			sameEvents(rt, "replay", att.Replay, want)
			if e.h.Clients(e.sid) != 2 {
				rt.Fatalf("%d clients, want 2", e.h.Clients(e.sid))
			}
		}
		drain(rt, other)
	})
}

// TestWorkerEventsAfterARestart: after a restart, a worker may have
// stored events newer than its planner's last one (here, events emitted
// on the worker alone). A subscribe to the planner with its workers
// takes its seam from the whole tree, so those events are replayed, and
// a cursor at one of them is not taken for a cursor from the future.
func TestWorkerEventsAfterARestart(t *testing.T) {
	st := openStore(t)
	old := newEnv(t, st, hub.Config{RingSize: 16})
	planner := old.mustEmit(event.SessionCreated, event.ActorSession, "")
	worker := event.NewID("sess_")
	if err := st.Apply(old.ctx, store.CreateSession{Session: store.Session{ID: worker, ParentSessionID: old.sid, CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	wem, err := old.b.Attach(old.ctx, worker, old.sid)
	if err != nil {
		t.Fatal(err)
	}
	var workerEvents []*event.Event
	for range 3 {
		ev, err := wem.Emit(bus.Spec{Type: event.ToolCalled, Actor: event.ActorTool, Payload: map[string]string{"k": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		workerEvents = append(workerEvents, ev)
	}
	old.barrier()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := old.b.Close(ctx); err != nil {
		t.Fatal(err)
	}

	_, h := startHub(t, st, hub.Config{RingSize: 16})
	withWorkers := protocol.Filter{EventTypes: []string{"tool.called", "session.created"}, IncludeWorkerSessions: true}
	att, serr := h.Subscribe(ctx, old.sid, &protocol.Subscribe{Filter: withWorkers, Since: &planner.ID})
	if serr != nil {
		t.Fatalf("subscribe: %+v", serr)
	}
	if err := att.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "replay of the worker's events", att.Replay, workerEvents)
	h.Unsubscribe(att.Client)
	att, serr = h.Subscribe(ctx, old.sid, &protocol.Subscribe{Filter: withWorkers, Since: &workerEvents[0].ID})
	if serr != nil {
		t.Fatalf("cursor at a worker's stored event: %+v", serr)
	}
	if err := att.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "replay from a worker's event", att.Replay, workerEvents[1:])
	h.Unsubscribe(att.Client)
}
