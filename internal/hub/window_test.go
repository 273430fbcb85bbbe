package hub_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// countingStore is the trace store, counting the reads of events a
// replay makes: its counts and its batches (not the count of model and
// tool calls that tells a streaming gap, hub.GapTypes, which a cursor
// before what the rings hold makes whatever the window).
type countingStore struct {
	*store.Store
	reads atomic.Int64
}

func (c *countingStore) CountEvents(ctx context.Context, q store.EventQuery) (int, error) {
	if !slices.Equal(q.Types, hub.GapTypes) {
		c.reads.Add(1)
	}
	return c.Store.CountEvents(ctx, q)
}

func (c *countingStore) ScanEventBatch(ctx context.Context, q store.EventQuery, limit int, fn func(*store.EventRow)) (int, error) {
	c.reads.Add(1)
	return c.Store.ScanEventBatch(ctx, q, limit, fn)
}

// windowTree is a planner, one worker sharing its outbox and two other
// sessions (whose appends compete for the windows' cap), served by a
// bus and a hub with replay windows over a real store.
type windowTree struct {
	*env
	cs      *countingStore
	worker  string
	wem     *bus.Emitter
	others  []*bus.Emitter
	emitted []*event.Event // every event the test emitted, both families, in emission order
}

func newWindowTree(t tb, st *store.Store, cfg hub.Config) *windowTree {
	t.Helper()
	ctx := ctxT(t)
	cfg.Logger = quiet
	cfg.RingSize = 1 << 16 // every streaming event stays: the store's answer is the catalog's
	b := bus.New(st, bus.Options{Logger: quiet})
	cs := &countingStore{Store: st}
	h := hub.New(cs, b, cfg)
	b.AddLive(h)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := b.Close(cctx); err != nil {
			t.Errorf("bus.Close: %v", err)
		}
	})
	create := func(parent string) string {
		sid := event.NewID("sess_")
		if err := st.Apply(ctx, store.CreateSession{Session: store.Session{ID: sid, ParentSessionID: parent, WorkspacePath: "/w",
			ActiveModel: "test:model", CreatedAt: time.Now()}}); err != nil {
			t.Fatalf("create session: %v", err)
		}
		return sid
	}
	sid := create("")
	em, err := b.Emitter(ctx, sid)
	if err != nil {
		t.Fatalf("emitter: %v", err)
	}
	worker := create(sid)
	wem, err := b.Attach(ctx, worker, sid)
	if err != nil {
		t.Fatalf("emitter: %v", err)
	}
	w := &windowTree{env: &env{t: t, ctx: ctx, st: st, b: b, h: h, sid: sid, em: em}, cs: cs, worker: worker, wem: wem}
	for range 2 {
		oem, err := b.Emitter(ctx, create(""))
		if err != nil {
			t.Fatalf("emitter: %v", err)
		}
		w.others = append(w.others, oem)
	}
	return w
}

// emitOn emits an event of typ on em with a payload of about size bytes.
func (w *windowTree) emitOn(em *bus.Emitter, typ event.Type, actor string, size int) *event.Event {
	w.t.Helper()
	ev, err := em.Emit(bus.Spec{Type: typ, Actor: actor, TurnID: "turn_1", Payload: map[string]string{"pad": strings.Repeat("p", size)}})
	if err != nil {
		w.t.Fatalf("emit %s: %v", typ, err)
	}
	if event.FamilyOf(typ) == event.Streaming {
		w.mu.Lock()
		w.streaming = append(w.streaming, ev)
		w.mu.Unlock()
	}
	w.emitted = append(w.emitted, ev)
	return ev
}

// truth is every event of the tree's two sessions, both families, in
// id order: the store's catalog events merged with the streaming events
// the test emitted (every one is still in its ring).
func (w *windowTree) truth() []*event.Event {
	w.t.Helper()
	if err := w.b.Flush(w.ctx); err != nil {
		w.t.Fatalf("flush: %v", err)
	}
	stored, err := w.st.Events(w.ctx, store.EventQuery{SessionIDs: []string{w.sid, w.worker}})
	if err != nil {
		w.t.Fatalf("store events: %v", err)
	}
	w.mu.Lock()
	for _, ev := range w.streaming {
		if ev.SessionID == w.sid || ev.SessionID == w.worker {
			stored = append(stored, ev)
		}
	}
	w.mu.Unlock()
	slices.SortFunc(stored, func(a, b *event.Event) int { return strings.Compare(a.ID, b.ID) })
	return stored
}

// replay subscribes with sub and collects the replay, then detaches.
func (w *windowTree) replay(sid string, sub protocol.Subscribe) (*hub.Attachment, int64) {
	w.t.Helper()
	before := w.cs.reads.Load()
	att, serr := w.h.Subscribe(w.ctx, sid, &sub)
	if serr != nil {
		w.t.Fatalf("subscribe %+v: %s: %s", sub, serr.Code, serr.Message)
	}
	if err := att.Collect(w.ctx); err != nil {
		w.t.Fatalf("replay: %v", err)
	}
	reads := w.cs.reads.Load() - before
	checkAttachment(w.t, att)
	w.h.Unsubscribe(att.Client)
	return att, reads
}

// covered reports whether the windows of sessions all cover since.
func (w *windowTree) covered(since string, sessions ...string) bool {
	for _, sid := range sessions {
		floor, _, ok := w.h.WindowOf(sid)
		if !ok || since < floor {
			return false
		}
	}
	return true
}

// TestWindowReplayEqualsStore is the replay window's property: for
// random sequences of appends to a planner, its worker and two other
// sessions (whose windows compete for a small cap, so windows are
// evicted whole and trimmed), windows forgotten (a resync, a skipped
// delivery point), retention cutoffs applied to windows and store in
// step, and cursors inside a window, at its floor, older than it, and
// at the seam, a replay (with or without workers, any filter) equals
// the store's answer (the stored catalog events merged with the ring's
// streaming events) event for event and byte for byte, with an exact
// count; and a replay whose cursor every window covers reads no event
// from the store.
func TestWindowReplayEqualsStore(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		cfg := hub.Config{WindowBytes: int64(rapid.IntRange(2000, 60000).Draw(rt, "windowBytes")),
			WindowEvents: rapid.IntRange(1, 80).Draw(rt, "windowEvents")}
		w := newWindowTree(rt, st, cfg)
		var catalogIDs []string // of the tree, for cursors
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 19).Draw(rt, fmt.Sprintf("op%d", step)); {
			case op < 14: // a burst of appends
				for i := range rapid.IntRange(1, 12).Draw(rt, fmt.Sprintf("burst%d", step)) {
					em := rapid.SampledFrom([]*bus.Emitter{w.em, w.wem, w.others[0], w.others[1]}).Draw(rt, fmt.Sprintf("on%d.%d", step, i))
					e := emissionGen().Draw(rt, fmt.Sprintf("ev%d.%d", step, i))
					if em == w.wem && rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("approval%d.%d", step, i)) == 0 {
						// A worker's approval event: it reaches the planner's
						// clients without include_worker_sessions.
						e.typ = rapid.SampledFrom([]event.Type{event.ApprovalRequested, event.ApprovalResolved}).Draw(rt, fmt.Sprintf("approvalType%d.%d", step, i))
					}
					ev := w.emitOn(em, e.typ, e.actor, rapid.IntRange(0, 600).Draw(rt, fmt.Sprintf("size%d.%d", step, i)))
					if event.FamilyOf(ev.Type) == event.Catalog && em != w.others[0] && em != w.others[1] {
						catalogIDs = append(catalogIDs, ev.ID)
					}
				}
			case op < 15: // a lost event: its session's window is forgotten
				w.h.Resync(rapid.SampledFrom([]string{w.sid, w.worker}).Draw(rt, fmt.Sprintf("resync%d", step)))
			case op < 16: // a delivery point moved past events the hub never saw
				w.h.Skipped([]string{w.sid, w.worker})
			case op < 17: // retention: windows first, then the store
				// The cutoff is an event of the planner's, which stays:
				// a tree left with no event would be removed whole.
				var planner []*event.Event
				for _, ev := range w.emitted {
					if ev.SessionID == w.sid && event.FamilyOf(ev.Type) == event.Catalog {
						planner = append(planner, ev)
					}
				}
				if len(planner) > 0 {
					w.barrier()
					cut := rapid.SampledFrom(planner).Draw(rt, fmt.Sprintf("cut%d", step)).TS
					w.h.PruneWindows(cut)
					if _, err := w.st.Prune(w.ctx, cut); err != nil {
						rt.Fatal(err)
					}
				}
			default: // a replay
				if len(catalogIDs) == 0 {
					continue
				}
				w.barrier()
				workers := rapid.Bool().Draw(rt, fmt.Sprintf("workers%d", step))
				m := matcherGen().Draw(rt, fmt.Sprintf("filter%d", step))
				sessions := []string{w.sid}
				if ts := m.typeSet(); workers || ts[event.ApprovalRequested] || ts[event.ApprovalResolved] {
					sessions = append(sessions, w.worker) // its events, or its approval events only
				}
				var cursors []string
				for _, s := range sessions {
					// At the window's edge, when that is an event (a cursor
					// that names no event of this process's is refused:
					// foreign.go).
					if floor, _, ok := w.h.WindowOf(s); ok && floor != "" && slices.ContainsFunc(w.emitted, func(ev *event.Event) bool { return ev.ID == floor }) {
						cursors = append(cursors, floor)
					}
				}
				since := rapid.SampledFrom(append(cursors, catalogIDs...)).Draw(rt, fmt.Sprintf("since%d", step))
				sub := m.subscribe()
				if workers {
					// A preset takes no workers: spell the types out.
					sub = protocol.Subscribe{Filter: protocol.Filter{EventTypes: typeNames(m.typeSet()), Actors: m.actors, IncludeWorkerSessions: true}}
				}
				sub.Since = &since
				memory := w.covered(since, sessions...)
				att, reads := w.replay(w.sid, sub)
				want := expect(w.truth(), treeMatcher(m, workers, w.sid), since, att.Seam)
				sameEvents(rt, fmt.Sprintf("replay since %s (%s, workers %v, window covers: %v)", since, m.name, workers, memory), att.Replay, want)
				if memory && reads != 0 {
					rt.Fatalf("a cursor every window covers read the store %d times", reads)
				}
			}
		}
	})
}

// treeMatcher narrows m to the planner's own events unless workers.
func treeMatcher(m matcher, workers bool, planner string) matcher {
	if workers {
		return m
	}
	m.session = planner
	return m
}

func typeNames(set map[event.Type]bool) []string {
	var out []string
	for ty := range set {
		out = append(out, string(ty))
	}
	slices.Sort(out)
	return out
}

// TestWindowReplayFromMemory: a cursor inside the window replays from
// memory alone (no count, no read of the store), exactly the store's
// answer, and the replays are counted by source.
func TestWindowReplayFromMemory(t *testing.T) {
	w := newWindowTree(t, openStore(t), hub.Config{WindowBytes: 1 << 20})
	var mid string
	// The worker's window: preset:full takes the worker's approval events.
	w.emitOn(w.wem, event.ApprovalRequested, event.ActorAgent, 5)
	for i := range 300 {
		ev := w.emitOn(w.em, catalogTypes[i%len(catalogTypes)], actors[i%len(actors)], i%50)
		w.emitOn(w.em, event.TextDelta, event.ActorModel, 5)
		if i == 100 {
			mid = ev.ID
		}
	}
	w.barrier()
	if !w.covered(mid, w.sid) {
		t.Fatal("the window does not cover the cursor")
	}
	for _, m := range []matcher{{name: "full", preset: event.PresetFull}, {name: "chat", preset: event.PresetChat},
		{name: "some", types: []string{"tool.called", "text.delta"}, actors: []string{event.ActorAgent, event.ActorModel}}} {
		sub := m.subscribe()
		sub.Since = &mid
		att, reads := w.replay(w.sid, sub)
		if reads != 0 {
			t.Fatalf("%s: the replay read the store %d times", m.name, reads)
		}
		sameEvents(t, m.name, att.Replay, expect(w.truth(), m, mid, att.Seam))
	}
}

// TestWindowJoinsStore: a cursor older than the window reads the store
// up to the window's floor and the window after it: every event once,
// in order, the count exact.
func TestWindowJoinsStore(t *testing.T) {
	w := newWindowTree(t, openStore(t), hub.Config{WindowBytes: 1 << 20, WindowEvents: 50})
	first := w.emitOn(w.em, event.TurnStarted, event.ActorUser, 0).ID
	for i := range 200 {
		w.emitOn(w.em, catalogTypes[i%len(catalogTypes)], actors[i%len(actors)], i%50)
		w.emitOn(w.wem, catalogTypes[(i+1)%len(catalogTypes)], actors[i%len(actors)], i%50)
		w.emitOn(w.em, event.ThinkingDelta, event.ActorModel, 5)
	}
	w.barrier()
	floor, held, ok := w.h.WindowOf(w.sid)
	if !ok || held != 50 || first >= floor {
		t.Fatalf("window: floor %s, %d held, ok %v; want 50 held after %s", floor, held, ok, first)
	}
	m := matcher{name: "every type", preset: event.PresetFull}
	sub := protocol.Subscribe{Filter: protocol.Filter{IncludeWorkerSessions: true}, Since: &first}
	att, reads := w.replay(w.sid, sub)
	if reads == 0 {
		t.Fatal("a cursor older than the window did not read the store")
	}
	sameEvents(t, "older than the window", att.Replay, expect(w.truth(), m, first, att.Seam))
	if _, err := w.st.Events(w.ctx, store.EventQuery{SessionIDs: []string{w.sid}}); err != nil {
		t.Fatal(err)
	}
}

// TestWindowReplayLimitExact: the count that decides replay_too_large
// is exact when the replay comes from a window too (alone, or after the
// store): a replay of exactly the limit is accepted, one more is
// refused.
func TestWindowReplayLimitExact(t *testing.T) {
	w := newWindowTree(t, openStore(t), hub.Config{WindowBytes: 1 << 20, WindowEvents: 40})
	first := w.emitOn(w.em, event.TurnStarted, event.ActorUser, 0).ID
	for i := range 100 {
		w.emitOn(w.em, catalogTypes[i%len(catalogTypes)], actors[i%len(actors)], 10)
	}
	w.barrier()
	all := expect(w.truth(), matcher{types: catalogOnly()}, first, "")
	for _, since := range []string{first, all[len(all)-30].ID} { // older than the window; inside it
		for _, over := range []bool{false, true} {
			w.barrier()
			want := expect(w.truth(), matcher{types: catalogOnly()}, since, "")
			limit := len(want)
			if over {
				limit--
			}
			// A hub with that limit, whose windows are filled as on a
			// node that starts following the tree.
			h := hub.New(w.cs, w.b, hub.Config{ReplayLimit: limit, WindowBytes: 1 << 20, WindowEvents: 40, Logger: quiet})
			w.b.AddLive(h)
			if err := h.Backfill(w.ctx, w.sid, "", w.em.LastDelivered(), nil); err != nil {
				t.Fatal(err)
			}
			if covered := since >= all[len(all)-40].ID; covered != w.coveredOn(h, since) {
				t.Fatalf("since %s: window covers it %v, want %v", since, !covered, covered)
			}
			replayAtLimit(t, w.ctx, h, w.sid, protocol.Subscribe{Preset: event.PresetFull, Since: &since}, want, limit, over)
		}
	}
}

// coveredOn reports whether h's window of the planner covers since.
func (w *windowTree) coveredOn(h *hub.Hub, since string) bool {
	floor, _, ok := h.WindowOf(w.sid)
	return ok && since >= floor
}

// TestWindowReplayStopsAtError: a replay from memory alone (written on
// the caller's goroutine) stops at the writer's first error too.
func TestWindowReplayStopsAtError(t *testing.T) {
	w := newWindowTree(t, openStore(t), hub.Config{WindowBytes: 8 << 20})
	first := w.emitOn(w.em, event.TurnStarted, event.ActorUser, 0).ID
	for i := range 1500 {
		w.emitOn(w.em, catalogTypes[i%len(catalogTypes)], actors[i%len(actors)], 10)
	}
	w.barrier()
	sub := protocol.Subscribe{Preset: event.PresetFull, Since: &first}
	att, serr := w.h.Subscribe(w.ctx, w.sid, &sub)
	if serr != nil {
		t.Fatalf("subscribe: %s", serr.Code)
	}
	defer w.h.Unsubscribe(att.Client)
	boom := errors.New("socket gone")
	calls, got := 0, 0
	err := att.StreamReplayBatches(w.ctx, func(items []*hub.Item) error {
		calls++
		got += len(items)
		if calls == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 2 || got >= att.Ack.ReplayEventCount {
		t.Fatalf("err %v after %d calls and %d of %d events, want %v after 2", err, calls, got, att.Ack.ReplayEventCount, boom)
	}
}

// TestWindowForgottenOnLostEvent: an event that could not be committed
// forgets its session's window (the store is the truth), and a replay
// afterwards is the store's answer, without the lost event.
func TestWindowForgottenOnLostEvent(t *testing.T) {
	st := openStore(t)
	w := newWindowTree(t, st, hub.Config{WindowBytes: 1 << 20})
	first := w.emitOn(w.em, event.TurnStarted, event.ActorUser, 0).ID
	w.emitOn(w.em, event.ToolCalled, event.ActorTool, 0)
	w.barrier()
	if _, _, ok := w.h.WindowOf(w.sid); !ok {
		t.Fatal("no window before the fault")
	}
	st.SetFault(store.FailMatching(2, func(ops []store.Op) bool { return store.HasEvent(ops, event.RouteDecided) }))
	lost := w.emitOn(w.em, event.RouteDecided, event.ActorRouter, 0)
	w.barrier()
	st.SetFault(nil)
	if floor, _, ok := w.h.WindowOf(w.sid); ok && floor < lost.ID {
		t.Fatalf("the window (floor %s) survived the lost event %s", floor, lost.ID)
	}
	w.emitOn(w.em, event.TurnCompleted, event.ActorAgent, 0)
	w.barrier()
	m := matcher{name: "full", preset: event.PresetFull}
	att, _ := w.replay(w.sid, protocol.Subscribe{Preset: event.PresetFull, Since: &first})
	sameEvents(t, "after the lost event", att.Replay, expect(w.truth(), m, first, att.Seam))
}

// TestWindowPrunedInStep: retention lets the windows go of what the
// store deletes, before it does: a replay never carries an event the
// store no longer holds.
func TestWindowPrunedInStep(t *testing.T) {
	w := newWindowTree(t, openStore(t), hub.Config{WindowBytes: 1 << 20})
	var evs []*event.Event
	for i := range 40 {
		evs = append(evs, w.emitOn(w.em, catalogTypes[i%len(catalogTypes)], event.ActorAgent, 0))
		time.Sleep(time.Millisecond) // distinct emission times
	}
	w.barrier()
	cut := evs[20].TS
	w.h.PruneWindows(cut)
	if _, err := w.st.Prune(w.ctx, cut); err != nil {
		t.Fatal(err)
	}
	floor, _, ok := w.h.WindowOf(w.sid)
	if !ok || floor < evs[19].ID {
		t.Fatalf("window floor %s after the cutoff, want at least %s", floor, evs[19].ID)
	}
	since := evs[5].ID
	att, _ := w.replay(w.sid, protocol.Subscribe{Preset: event.PresetFull, Since: &since})
	for _, it := range att.Replay {
		if it.ID <= evs[19].ID {
			t.Fatalf("replayed %s, which retention deleted", it.ID)
		}
	}
	sameEvents(t, "after retention", att.Replay, expect(w.truth(), matcher{name: "full", preset: event.PresetFull}, since, att.Seam))
}

// TestWindowBackfillFills: a tree a node starts following (Backfill)
// gets windows filled from the store up to the delivery point, so a
// replay there reads no event from the store; a window that held
// something before is replaced, not extended.
func TestWindowBackfillFills(t *testing.T) {
	w := newWindowTree(t, openStore(t), hub.Config{WindowBytes: 1 << 20, WindowEvents: 30})
	first := w.emitOn(w.em, event.TurnStarted, event.ActorUser, 0).ID
	for i := range 60 {
		w.emitOn(w.em, catalogTypes[i%len(catalogTypes)], event.ActorAgent, 0)
		w.emitOn(w.wem, catalogTypes[i%len(catalogTypes)], event.ActorTool, 0)
	}
	w.barrier()
	// A second hub, as on a node that starts following the tree.
	h := hub.New(w.cs, w.b, hub.Config{WindowBytes: 1 << 20, WindowEvents: 30, Logger: quiet})
	w.b.AddLive(h)
	// Every streaming event since the start is held (none was emitted):
	// the replay has no streaming gap to look for in the store.
	if err := h.Backfill(w.ctx, w.sid, "", w.em.LastDelivered(), nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{w.sid, w.worker} {
		if _, held, ok := h.WindowOf(s); !ok || held != 30 {
			t.Fatalf("window of %s after Backfill: %d held, ok %v; want 30", s, held, ok)
		}
	}
	all := expect(w.truth(), matcher{types: catalogOnly()}, first, "")
	since := all[len(all)-20].ID
	before := w.cs.reads.Load()
	sub := protocol.Subscribe{Filter: protocol.Filter{IncludeWorkerSessions: true}, Since: &since}
	att, serr := h.Subscribe(w.ctx, w.sid, &sub)
	if serr != nil {
		t.Fatalf("subscribe: %s", serr.Code)
	}
	if err := att.Collect(w.ctx); err != nil {
		t.Fatal(err)
	}
	h.Unsubscribe(att.Client)
	if n := w.cs.reads.Load() - before; n != 0 {
		t.Fatalf("a replay from a backfilled window read the store %d times", n)
	}
	sameEvents(t, "backfilled", att.Replay, expect(w.truth(), matcher{types: catalogOnly()}, since, att.Seam))
}

// TestWindowForgottenWhenDeliveryPointSkips: when the delivery point of
// a tree moves past events the hub was never handed (here CatchUp past
// an event stored without the bus, as a cluster node's projection
// applies another node's), the tree's windows are forgotten, and a
// replay from a cursor they covered carries the skipped event, from the
// store.
func TestWindowForgottenWhenDeliveryPointSkips(t *testing.T) {
	w := newWindowTree(t, openStore(t), hub.Config{WindowBytes: 1 << 20})
	var since string
	for i := range 20 {
		ev := w.emitOn(w.em, catalogTypes[i%len(catalogTypes)], event.ActorAgent, 0)
		if i == 5 {
			since = ev.ID
		}
	}
	w.barrier()
	if !w.covered(since, w.sid) {
		t.Fatal("the window does not cover the cursor")
	}
	seq, err := event.NewSequencer(w.em.LastDelivered(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, ts := seq.Next()
	skipped := &event.Event{ID: id, Type: event.ToolCalled, SessionID: w.sid, TS: ts, Actor: event.ActorTool}
	if err := skipped.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := w.st.Apply(w.ctx, store.AppendEvent{Event: skipped}); err != nil {
		t.Fatal(err)
	}
	if err := w.b.CatchUp(w.ctx, w.sid); err != nil {
		t.Fatal(err)
	}
	// The test's events, without the bus's meta-events: the skipped id
	// came from another sequencer, so a meta-event this bus emits next
	// (of this very subscribe) may sort before it, below the seam.
	types := map[event.Type]bool{}
	for _, typ := range catalogTypes {
		types[typ] = true
	}
	m := matcher{name: "the test's types", types: typeNames(types)}
	sub := m.subscribe()
	sub.Since = &since
	att, _ := w.replay(w.sid, sub)
	if n := len(att.Replay); n == 0 || att.Replay[n-1].ID != skipped.ID {
		t.Fatalf("the replay does not end with the skipped event %s: %v", skipped.ID, short(ids(att.Replay)))
	}
	sameEvents(t, "after a skip", att.Replay, expect(w.truth(), m, since, att.Seam))
}
