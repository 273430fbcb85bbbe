package hub_test

import (
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// heldStreaming subscribes to e from cursor and returns the streaming
// events its replay carries and the ack's streaming_gap.
func heldStreaming(t *testing.T, e *env, cursor string) ([]*hub.Item, bool) {
	t.Helper()
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &cursor})
	e.h.Unsubscribe(att.Client)
	var out []*hub.Item
	for _, it := range att.Replay {
		if event.FamilyOf(it.Type) == event.Streaming {
			out = append(out, it)
		}
	}
	return out, att.Ack.StreamingGap
}

// TestRingGlobalCap: with every ring together capped at RingBytes, the
// total never exceeds the cap once a publish returns; idle sessions (no
// turn in flight) lose their oldest events first, least recently active
// first, before a session with a turn in flight loses any; each event
// let go is counted; and a cursor into evicted ground gets
// streaming_gap while the catalog events are all still replayed.
func TestRingGlobalCap(t *testing.T) {
	st := openStore(t)
	// The cost of one delta in a ring, measured on an uncapped hub.
	probe := newEnv(t, st, hub.Config{RingSize: 8})
	probe.mustEmit(event.TextDelta, event.ActorModel, "t")
	probe.barrier()
	unit := probe.h.RingBytes()
	if unit <= 0 {
		t.Fatalf("a held delta costs %d", unit)
	}
	capBytes := 20 * unit
	a := newEnv(t, st, hub.Config{RingSize: 1000, RingBytes: capBytes})
	c := a.sibling()
	b := a.sibling()
	start := map[*env]string{}
	for _, e := range []*env{a, c, b} {
		start[e] = e.mustEmit(event.SessionCreated, event.ActorSession, "").ID
		e.barrier()
	}
	emitted := 0
	deltas := func(e *env, n int) {
		t.Helper()
		for range n {
			e.mustEmit(event.TextDelta, event.ActorModel, "t")
			e.barrier()
			emitted++
			if got := a.h.RingBytes(); got > capBytes {
				t.Fatalf("rings hold %d bytes, over the cap of %d", got, capBytes)
			}
		}
	}
	deltas(a, 10) // idle, least recently active
	deltas(c, 5)  // idle, more recent
	b.mustEmit(event.TurnStarted, event.ActorSession, "t")
	deltas(b, 12) // a turn in flight
	if a.h.RingEvictions() == 0 {
		t.Fatal("nothing evicted over the cap")
	}
	heldA, gapA := heldStreaming(t, a, start[a])
	heldC, gapC := heldStreaming(t, c, start[c])
	heldB, gapB := heldStreaming(t, b, start[b])
	if len(heldA) == 10 || !gapA {
		t.Fatalf("the oldest idle session holds %d of 10 (gap %v), want some evicted and a gap", len(heldA), gapA)
	}
	if len(heldC) != 5 || gapC {
		t.Fatalf("a more recent idle session holds %d of 5 (gap %v) while an older one still had events", len(heldC), gapC)
	}
	if len(heldB) != 12 || gapB {
		t.Fatalf("the session with a turn in flight holds %d of 12 (gap %v) while idle sessions had events", len(heldB), gapB)
	}
	// A cursor at the newest evicted event of A has lost nothing.
	all := a.all()
	var lastEvicted string
	for _, ev := range all {
		if event.FamilyOf(ev.Type) == event.Streaming && ev.ID < heldA[0].ID {
			lastEvicted = ev.ID
		}
	}
	if held, gap := heldStreaming(t, a, lastEvicted); gap || len(held) != len(heldA) {
		t.Fatalf("cursor at the last evicted event: %d held, gap %v", len(held), gap)
	}

	deltas(b, 20) // past what the idle sessions hold
	heldA, _ = heldStreaming(t, a, start[a])
	heldC, gapC = heldStreaming(t, c, start[c])
	heldB, gapB = heldStreaming(t, b, start[b])
	if len(heldA) != 0 || len(heldC) != 0 || !gapC {
		t.Fatalf("idle sessions still hold %d and %d events once the busy one lost some", len(heldA), len(heldC))
	}
	if !gapB || len(heldB) == 0 || len(heldB) == 32 {
		t.Fatalf("busy session holds %d of 32 (gap %v), want the newest, with a gap", len(heldB), gapB)
	}
	var newest string
	for _, ev := range b.all() {
		if ev.Type == event.TextDelta {
			newest = ev.ID
		}
	}
	if heldB[len(heldB)-1].ID != newest {
		t.Fatalf("the busy session lost its newest event %s", newest)
	}
	if got, want := a.h.RingEvictions(), int64(emitted-len(heldB)); got != want {
		t.Fatalf("%d evictions counted, want %d (%d emitted, %d held)", got, want, emitted, len(heldB))
	}
	// Every catalog event is still replayed from a cursor in evicted
	// ground, with the streaming events still held.
	cursor := start[b]
	att := b.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &cursor})
	held := map[string]bool{}
	for _, it := range heldB {
		held[it.ID] = true
	}
	var want []*event.Event
	for _, ev := range expect(b.all(), matcher{preset: event.PresetFull}, cursor, att.Seam) {
		if event.FamilyOf(ev.Type) == event.Catalog || held[ev.ID] {
			want = append(want, ev)
		}
	}
	sameEvents(t, "replay", att.Replay, want)
	b.h.Unsubscribe(att.Client)
}

// TestRingGlobalCapConcurrent: sessions publishing at once never leave
// the rings over the cap once they are done, and the hub's account of
// the bytes held matches what the rings replay.
func TestRingGlobalCapConcurrent(t *testing.T) {
	st := openStore(t)
	probe := newEnv(t, st, hub.Config{RingSize: 8})
	probe.mustEmit(event.TextDelta, event.ActorModel, "t")
	probe.barrier()
	unit := probe.h.RingBytes()
	capBytes := 50 * unit
	base := newEnv(t, st, hub.Config{RingSize: 40, RingBytes: capBytes})
	envs := []*env{base}
	for range 5 {
		envs = append(envs, base.sibling())
	}
	start := map[*env]string{}
	for _, e := range envs {
		start[e] = e.mustEmit(event.SessionCreated, event.ActorSession, "").ID
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(envs))
	for i, e := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				if _, err := e.emit(event.TurnStarted, event.ActorSession, "t"); err != nil {
					errs <- err
					return
				}
			}
			for range 60 {
				if _, err := e.emit(event.TextDelta, event.ActorModel, "t"); err != nil {
					errs <- err
					return
				}
			}
			errs <- e.em.Barrier(e.ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := base.h.RingBytes(); got > capBytes {
		t.Fatalf("rings hold %d bytes after the publishes, over the cap of %d", got, capBytes)
	}
	var held int64
	for _, e := range envs {
		items, _ := heldStreaming(t, e, start[e])
		held += int64(len(items))
	}
	if got := base.h.RingBytes(); got != held*unit {
		t.Fatalf("the hub counts %d bytes, the rings hold %d events of %d", got, held, unit)
	}
	if got, want := base.h.RingEvictions(), int64(len(envs)*60)-held-int64(len(envs)*(60-40)); got < want {
		t.Fatalf("%d evictions counted, want at least %d", got, want)
	}
}
