package bus

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/event"
)

// treeEvents makes the events of a tree committed elsewhere (another
// node, the tree's owner): ids from one sequencer, in order.
type treeEvents struct {
	t   tb
	seq *event.Sequencer
}

func newTreeEvents(t tb) *treeEvents {
	seq, err := event.NewSequencer("", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &treeEvents{t: t, seq: seq}
}

func (te *treeEvents) next(sid string, typ event.Type) *event.Event {
	te.t.Helper()
	id, ts := te.seq.Next()
	ev := &event.Event{ID: id, Type: typ, SessionID: sid, TS: ts, Actor: "test"}
	if err := ev.Seal(); err != nil {
		te.t.Fatal(err)
	}
	return ev
}

// apply stores catalog events as this node's projection does, ahead
// of the feed that relays them.
func (f *fakeStore) apply(evs ...*event.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range evs {
		ev.Seq = int64(len(f.events) + 1)
		f.events = append(f.events, ev)
	}
}

// idsOf lists events' ids.
func idsOf(evs []*event.Event) []string {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

// liveIDs is a live sink that records the ids it is given.
type liveIDs struct {
	mu  sync.Mutex
	ids []string
}

func (l *liveIDs) Publish(ev *event.Event) {
	l.mu.Lock()
	l.ids = append(l.ids, ev.ID)
	l.mu.Unlock()
}

func (l *liveIDs) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids)
}

// TestWorkerEmitterOfARelayedTreeKeepsTheDeliveryPoint: on a node that
// relays a tree, a client that includes workers makes the emitters of
// the planner's workers from the store (the hub does, at subscribe).
// For a worker the projection applied but the feed has not relayed yet,
// that must not move the tree's delivery point to the worker's newest
// stored event: the feed would then drop everything in between, the
// planner's events included, as already delivered, and every client of
// the tree on the node would lose them.
func TestWorkerEmitterOfARelayedTreeKeepsTheDeliveryPoint(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	st.parents = map[string]string{"sess_w": "sess_p"}
	b := New(st, Options{})
	live := &liveIDs{}
	b.AddLive(live)
	te := newTreeEvents(t)

	// The node follows the planner's tree and relayed its first event.
	if err := b.Follow(ctx, "sess_p"); err != nil {
		t.Fatal(err)
	}
	p1 := te.next("sess_p", event.ToolCalled)
	st.apply(p1)
	if err := b.Relay(ctx, p1); err != nil {
		t.Fatal(err)
	}
	// The owner starts a worker; the projection applies its events
	// before the feed relays them. A delta of the planner comes between
	// (never stored).
	d1 := te.next("sess_p", event.TextDelta)
	w1, w2 := te.next("sess_w", event.SessionCreated), te.next("sess_w", event.TurnStarted)
	st.apply(w1, w2)

	// A client subscribes to the planner with its workers, in that
	// window.
	em, err := b.Emitter(ctx, "sess_w")
	if err != nil {
		t.Fatal(err)
	}
	em.WithDelivered(func(last string) {
		if last != p1.ID {
			t.Errorf("the seam is %s after the worker's emitter was made, want the last relayed event %s", last, p1.ID)
		}
	})
	for _, ev := range []*event.Event{d1, w1, w2} {
		if err := b.Relay(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	closeAll(t, b, st)
	if want := idsOf([]*event.Event{p1, d1, w1, w2}); !slices.Equal(live.got(), want) {
		t.Fatalf("live sink got %v, want %v", live.got(), want)
	}
}

// TestWorkerEmitterMovesTheSeamToWhatItStored: on a node that writes
// its trees (single-node), a worker whose emitter is made from the
// store after a restart joins its planner's outbox and moves the seam
// to its own newest stored event, when that is newer than the
// planner's: a client's snapshot or replay then covers it.
func TestWorkerEmitterMovesTheSeamToWhatItStored(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	st.parents = map[string]string{"sess_w": "sess_p"}
	te := newTreeEvents(t)
	p1, w1, w2 := te.next("sess_p", event.DelegateStarted), te.next("sess_w", event.SessionCreated), te.next("sess_w", event.TurnStarted)
	st.apply(p1, w1, w2)
	b := New(st, Options{})
	pe, err := b.Emitter(ctx, "sess_p")
	if err != nil {
		t.Fatal(err)
	}
	if got := pe.LastDelivered(); got != p1.ID {
		t.Fatalf("the planner's seam is %s, want its newest stored event %s", got, p1.ID)
	}
	we, err := b.Emitter(ctx, "sess_w")
	if err != nil {
		t.Fatal(err)
	}
	if got := pe.LastDelivered(); got != w2.ID {
		t.Fatalf("the tree's seam is %s after the worker joined, want the worker's newest stored event %s", got, w2.ID)
	}
	// And the worker's next id sorts after everything stored.
	ev, err := we.Emit(Spec{Type: event.TextDelta, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID <= w2.ID {
		t.Fatalf("new id %s is not after the stored %s", ev.ID, w2.ID)
	}
	closeAll(t, b, st)
}

// TestRelayedTreeWithWorkerSubscriptionsDeliversEveryEventOnce: for
// any interleaving of the projection storing a tree's catalog events,
// the feed relaying the tree's events (both families, in id order,
// never ahead of the projection for catalog ones) and clients
// subscribing with their workers (each making the emitters of the
// workers the store knows), the live sinks get every relayed event
// exactly once, in id order.
func TestRelayedTreeWithWorkerSubscriptionsDeliversEveryEventOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		st := newFakeStore()
		st.parents = map[string]string{}
		te := newTreeEvents(rt)
		const root = "sess_root"
		sessions := []string{root}
		// The tree as the owner wrote it: sessions are created (a
		// session.created of a worker, whose parent is any earlier
		// session) and emit catalog and streaming events.
		var evs []*event.Event
		for range rapid.IntRange(1, 60).Draw(rt, "events") {
			switch rapid.IntRange(0, 5).Draw(rt, "kind") {
			case 0:
				sid := fmt.Sprintf("sess_w%d", len(sessions))
				st.mu.Lock()
				st.parents[sid] = rapid.SampledFrom(sessions).Draw(rt, "parent")
				st.mu.Unlock()
				sessions = append(sessions, sid)
				evs = append(evs, te.next(sid, event.SessionCreated))
			case 1, 2:
				evs = append(evs, te.next(rapid.SampledFrom(sessions).Draw(rt, "session"), event.ToolCalled))
			default:
				evs = append(evs, te.next(rapid.SampledFrom(sessions).Draw(rt, "session"), event.TextDelta))
			}
		}
		b := New(st, Options{})
		live := &liveIDs{}
		b.AddLive(live)
		if err := b.Follow(ctx, root); err != nil {
			rt.Fatal(err)
		}
		applied, relayed := 0, 0 // prefixes of evs
		for steps := 0; relayed < len(evs); steps++ {
			step := 1 // in the end, the feed catches up
			if steps < 4*len(evs) {
				step = rapid.IntRange(0, 2).Draw(rt, "step")
			}
			switch step {
			case 0: // the projection applies the next catalog event
				for applied < len(evs) && event.FamilyOf(evs[applied].Type) != event.Catalog {
					applied++
				}
				if applied < len(evs) {
					st.apply(evs[applied])
					applied++
				}
			case 1: // the feed relays the next event, once applied
				ev := evs[relayed]
				if event.FamilyOf(ev.Type) == event.Catalog && relayed >= applied {
					st.apply(ev) // the feed waits for the projection
					applied = relayed + 1
				}
				if err := b.Relay(ctx, ev); err != nil {
					rt.Fatal(err)
				}
				relayed++
				applied = max(applied, relayed)
			case 2: // a client subscribes with the workers the store knows
				st.mu.Lock()
				var known []string
				for _, ev := range st.events {
					if ev.Type == event.SessionCreated {
						known = append(known, ev.SessionID)
					}
				}
				st.mu.Unlock()
				for _, sid := range known {
					if _, err := b.Emitter(ctx, sid); err != nil {
						rt.Fatal(err)
					}
				}
			}
		}
		closeAll(rt, b, st)
		if got, want := live.got(), idsOf(evs); !slices.Equal(got, want) {
			rt.Fatalf("live sinks got %d events %v, want %d %v", len(got), got, len(want), want)
		}
	})
}

// BenchmarkRelay is the hot path of a node that relays a tree: one
// event handed to the live sinks in its tree's outbox. It must not
// allocate.
func BenchmarkRelay(b *testing.B) {
	ctx := context.Background()
	st := newFakeStore()
	bus := New(st, Options{})
	bus.AddLive(liveFunc(func(*event.Event) {}))
	te := newTreeEvents(b)
	if err := bus.Follow(ctx, "sess_p"); err != nil {
		b.Fatal(err)
	}
	evs := make([]*event.Event, 1<<17)
	for i := range evs {
		evs[i] = te.next("sess_p", event.TextDelta)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(evs) {
			// Past the last one: from here on they are dropped as
			// delivered (run with -benchtime under 131072x to avoid).
			i = 0
		}
		if err := bus.Relay(ctx, evs[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	closeAll(b, bus, st)
}
