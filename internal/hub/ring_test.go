package hub_test

import (
	"context"
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
	"github.com/metis-agent/metis/protocol"
)

// TestTinyRingStreamingGap: with a ring of 0 to 3 streaming events, a
// replay from any cursor carries every matching catalog event after it
// and exactly the matching streaming events still held by the ring, in
// id order; the ack's streaming_gap is true exactly when a streaming
// event after the cursor that the filter matches was evicted: a filter
// that asked for none of the evicted events has nothing missing.
func TestTinyRingStreamingGap(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(0, 3).Draw(rt, "ring")
		e := newEnv(rt, st, hub.Config{RingSize: size})
		first := e.mustEmit(event.SessionCreated, event.ActorSession, "")
		cursors := []string{first.ID}
		for _, em := range rapid.SliceOfN(emissionGen(), 0, 25).Draw(rt, "events") {
			cursors = append(cursors, e.mustEmit(em.typ, em.actor, "t").ID)
		}
		e.barrier()
		var streaming []*event.Event
		e.mu.Lock()
		streaming = append(streaming, e.streaming...)
		e.mu.Unlock()
		evicted := streaming[:max(0, len(streaming)-size)]
		held := map[string]bool{}
		for _, ev := range streaming[len(evicted):] {
			held[ev.ID] = true
		}

		for k := range rapid.IntRange(1, 3).Draw(rt, "subscribes") {
			since := cursors[rapid.IntRange(0, len(cursors)-1).Draw(rt, fmt.Sprintf("since%d", k))]
			m := matcherGen().Draw(rt, fmt.Sprintf("filter%d", k))
			sub := m.subscribe()
			sub.Since = &since
			att := e.subscribe(sub)
			e.barrier()
			var want []*event.Event
			for _, ev := range expect(e.all(), m, since, att.Seam) {
				if event.FamilyOf(ev.Type) == event.Catalog || held[ev.ID] {
					want = append(want, ev)
				}
			}
			sameEvents(rt, fmt.Sprintf("replay %d from %s", k, since), att.Replay, want)
			gap := len(expect(evicted, m, since, "")) > 0
			if att.Ack.StreamingGap != gap {
				rt.Fatalf("subscribe %d from %s: streaming_gap %v, want %v (ring %d, %d of %d streaming events evicted)",
					k, since, att.Ack.StreamingGap, gap, size, len(evicted), len(streaming))
			}
			e.h.Unsubscribe(att.Client)
		}
	})
}

// TestStreamingGapAfterRestart: a new process (bus and hub) over the
// same store never held the streaming events of the old one; a replay
// from a cursor before the restart reports a gap exactly when a model
// call or a tool call (a shell command streams its output) happened
// after the cursor, and still replays every catalog event.
func TestStreamingGapAfterRestart(t *testing.T) {
	st := openStore(t)
	for _, call := range []string{"none", "llm", "tool"} {
		withCall := call != "none"
		t.Run("call="+call, func(t *testing.T) {
			old := newEnv(t, st, hub.Config{RingSize: 64})
			cursor := old.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
			switch call {
			case "none":
				old.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
				old.mustEmit(event.TurnCompleted, event.ActorSession, "turn_1")
			case "llm":
				old.mustEmit(event.LLMCallStarted, event.ActorAgent, "turn_1")
				old.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
				old.mustEmit(event.LLMCallCompleted, event.ActorAgent, "turn_1")
			case "tool":
				old.mustEmit(event.ToolCalled, event.ActorTool, "turn_1")
				old.mustEmit(event.ToolOutputDelta, event.ActorTool, "turn_1")
				old.mustEmit(event.ToolCompleted, event.ActorTool, "turn_1")
			}
			old.barrier()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := old.b.Close(ctx); err != nil {
				t.Fatal(err)
			}

			b, h := startHub(t, st, hub.Config{RingSize: 64})
			sub := protocol.Subscribe{Preset: event.PresetFull, Since: &cursor.ID}
			att, serr := h.Subscribe(ctx, old.sid, &sub)
			if serr != nil {
				t.Fatalf("subscribe: %+v", serr)
			}
			if err := att.Collect(ctx); err != nil {
				t.Fatal(err)
			}
			if att.Ack.StreamingGap != withCall {
				t.Fatalf("streaming_gap %v after a restart, want %v", att.Ack.StreamingGap, withCall)
			}
			catalogOnly, serr := h.Subscribe(ctx, old.sid, &protocol.Subscribe{Preset: event.PresetChat, Since: &cursor.ID})
			if serr != nil {
				t.Fatalf("subscribe: %+v", serr)
			}
			if catalogOnly.Ack.StreamingGap != withCall {
				t.Fatalf("preset:chat: streaming_gap %v after a restart, want %v", catalogOnly.Ack.StreamingGap, withCall)
			}
			h.Unsubscribe(catalogOnly.Client)
			catalogOnly, serr = h.Subscribe(ctx, old.sid, &protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{"tool.called"}}, Since: &cursor.ID})
			if serr != nil {
				t.Fatalf("subscribe: %+v", serr)
			}
			if catalogOnly.Ack.StreamingGap {
				t.Fatal("streaming_gap after a restart for a filter with no streaming type")
			}
			h.Unsubscribe(catalogOnly.Client)
			old.b, old.h = b, h
			var want []*event.Event
			for _, ev := range expect(old.all(), matcher{preset: event.PresetFull}, cursor.ID, att.Seam) {
				if event.FamilyOf(ev.Type) == event.Catalog {
					want = append(want, ev)
				}
			}
			sameEvents(t, "replay after restart", att.Replay, want)
			// Events of the new process after the seam are live, and a
			// cursor held in the new process has no gap.
			em, err := b.Emitter(ctx, old.sid)
			if err != nil {
				t.Fatal(err)
			}
			old.em = em
			held := old.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
			old.barrier()
			full := matcher{preset: event.PresetFull}
			sameEvents(t, "live after restart", drain(t, att), expect(old.all(), full, att.Seam, ""))
			// (A cursor at the old process's last event is not one: when
			// a model call was open there, what that process streamed
			// after it is gone, a gap; TestCursorAtAnOpenCallAfterARestart.)
			sub = protocol.Subscribe{Preset: event.PresetFull, Since: &held.ID}
			att2, serr := h.Subscribe(ctx, old.sid, &sub)
			if serr != nil {
				t.Fatalf("subscribe: %+v", serr)
			}
			if err := att2.Collect(ctx); err != nil {
				t.Fatal(err)
			}
			if att2.Ack.StreamingGap {
				t.Fatal("streaming_gap for a cursor the new process holds")
			}
			old.barrier()
			sameEvents(t, "replay in the new process", att2.Replay, expect(old.all(), full, held.ID, att2.Seam))
		})
	}
}

// TestRingZeroNeverReplaysStreaming: without a ring, a replay carries
// catalog events only, and a gap whenever deltas followed the cursor.
func TestRingZeroNeverReplaysStreaming(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{})
	first := e.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
	e.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
	done := e.mustEmit(event.TurnCompleted, event.ActorAgent, "turn_1")
	e.barrier()
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Since: &first.ID})
	if !att.Ack.StreamingGap {
		t.Fatal("no streaming_gap though a delta is gone")
	}
	sameEvents(t, "replay", att.Replay, []*event.Event{done})
}

// TestCursorFromBeforeARestart: a client that holds a delta of a model
// call that was streaming when the server stopped (an id never stored)
// is told the deltas after it are gone.
func TestCursorFromBeforeARestart(t *testing.T) {
	st := openStore(t)
	old := newEnv(t, st, hub.Config{RingSize: 64})
	old.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
	old.mustEmit(event.LLMCallStarted, event.ActorAgent, "turn_1")
	delta := old.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
	old.barrier()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := old.b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, h := startHub(t, st, hub.Config{RingSize: 64})
	att, serr := h.Subscribe(ctx, old.sid, &protocol.Subscribe{Preset: event.PresetFull, Since: &delta.ID})
	if serr != nil {
		t.Fatalf("subscribe: %+v", serr)
	}
	if !att.Ack.StreamingGap || att.Ack.ReplayEventCount != 0 {
		t.Fatalf("ack %+v: want a streaming gap and no replay", att.Ack)
	}
	// A client that asked for no streaming type missed nothing.
	att, serr = h.Subscribe(ctx, old.sid, &protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{"turn.completed", "llm.call_completed"}}, Since: &delta.ID})
	if serr != nil {
		t.Fatalf("subscribe: %+v", serr)
	}
	if att.Ack.StreamingGap {
		t.Fatalf("ack %+v: streaming_gap for a filter with no streaming type", att.Ack)
	}
}

// TestCursorAtAnOpenCallAfterARestart (issue 20, item 5): after a
// crash the new process delivers events of its own (recovery ends the
// turn), so a cursor from the old process is before what it holds;
// when a model call was open at that cursor, the deltas the old process
// streamed after it died with its ring, and the ack says so, whatever
// the new process stored since (here a turn.cancelled, no llm.call_*).
// A cursor before the call has one too: the call came after it. The
// same holds for a shell command's output (tool.output_delta) while its
// tool call was open.
func TestCursorAtAnOpenCallAfterARestart(t *testing.T) {
	st := openStore(t)
	for _, call := range []string{"llm", "tool"} {
		t.Run(call, func(t *testing.T) {
			old := newEnv(t, st, hub.Config{RingSize: 64})
			before := old.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
			opener, delta := event.LLMCallStarted, event.TextDelta
			if call == "tool" {
				old.mustEmit(event.LLMCallStarted, event.ActorAgent, "turn_1")
				old.mustEmit(event.LLMCallCompleted, event.ActorAgent, "turn_1")
				opener, delta = event.ToolCalled, event.ToolOutputDelta
			}
			started := old.mustEmit(opener, event.ActorAgent, "turn_1")
			first := old.mustEmit(delta, event.ActorModel, "turn_1")
			old.mustEmit(delta, event.ActorModel, "turn_1")
			old.barrier()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := old.b.Close(ctx); err != nil {
				t.Fatal(err)
			}
			b, h := startHub(t, st, hub.Config{RingSize: 64})
			em, err := b.Emitter(ctx, old.sid)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := em.EmitWait(ctx, bus.Spec{Type: event.TurnCancelled, Actor: event.ActorSession, TurnID: "turn_1", Payload: map[string]string{"reason": "server_restart"}}); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name   string
				cursor string
				gap    bool
			}{{"a delta of the open call", first.ID, true}, {"the open call's start", started.ID, true}, {"before the call", before.ID, true}} {
				att, serr := h.Subscribe(ctx, old.sid, &protocol.Subscribe{Preset: event.PresetChat, Since: &c.cursor})
				if serr != nil {
					t.Fatalf("%s: subscribe: %+v", c.name, serr)
				}
				h.Unsubscribe(att.Client)
				if att.Ack.StreamingGap != c.gap {
					t.Errorf("cursor at %s: streaming_gap %v, want %v (ack %+v)", c.name, att.Ack.StreamingGap, c.gap, att.Ack)
				}
			}
		})
	}
}

// TestForeignCursorAfterARestartWhoseClockIsBehind: a process stopped
// inside a model call, with its clock ahead of the next one's; a client
// holds one of its deltas, never stored. The next process stores the
// call's end and the turn's cancellation under ids before that cursor,
// then, once its clock passed it, more events. A replay from the cursor
// would skip the cancellation (and a client drops events below its
// cursor as seen), so the cursor is refused with invalid_cursor: the
// client takes a snapshot instead, which has them.
func TestForeignCursorAfterARestartWhoseClockIsBehind(t *testing.T) {
	st := openStore(t)
	cfg := hub.Config{RingSize: 64}
	e := newEnv(t, st, cfg)
	e.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
	e.mustEmit(event.LLMCallStarted, event.ActorAgent, "turn_1")
	e.barrier()
	ahead, err := event.NewSequencer(e.em.LastDelivered(), func() time.Time { return time.Now().Add(300 * time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	cursor, _ := ahead.Next() // a delta the stopped process streamed
	e.restart(cfg)
	e.mustEmit(event.LLMCallFailed, event.ActorSession, "turn_1")
	cancelled := e.mustEmit(event.TurnCancelled, event.ActorSession, "turn_1")
	if cancelled.ID >= cursor {
		t.Fatalf("the cancellation %s does not sort before the cursor %s", cancelled.ID, cursor)
	}
	at, _ := event.IDTime(cursor)
	time.Sleep(time.Until(at) + 5*time.Millisecond)
	later := e.mustEmit(event.TurnStarted, event.ActorSession, "turn_2")
	e.barrier()
	if later.ID <= cursor {
		t.Fatalf("the later event %s does not sort after the cursor %s", later.ID, cursor)
	}
	serr := e.refused(protocol.Subscribe{Preset: event.PresetChat, Since: &cursor}, protocol.CodeInvalidCursor)
	if !strings.Contains(serr.Message, "snapshot") {
		t.Fatalf("the refusal does not say what to do: %q", serr.Message)
	}
}

// TestForeignCursorAfterARestartSubscribedFirst: the next process was
// subscribed to before it gave the session any id (its hub then holds
// the session from just after the last stored event). A client holding
// a delta the stopped process streamed after that, never stored, resumes
// once the next process has given ids (all after the delta): it is told
// streaming_gap (the rest of that call died with the process), and gets
// every event the next process gave.
func TestForeignCursorAfterARestartSubscribedFirst(t *testing.T) {
	st := openStore(t)
	cfg := hub.Config{RingSize: 64}
	e := newEnv(t, st, cfg)
	e.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
	e.mustEmit(event.LLMCallStarted, event.ActorAgent, "turn_1")
	delta := e.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
	e.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
	e.barrier()
	e.restart(cfg)
	first := e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Snapshot: true})
	e.h.Unsubscribe(first.Client)
	failed := e.mustEmit(event.LLMCallFailed, event.ActorSession, "turn_1")
	cancelled := e.mustEmit(event.TurnCancelled, event.ActorSession, "turn_1")
	e.barrier()
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Since: &delta.ID})
	defer e.h.Unsubscribe(att.Client)
	if !att.Ack.StreamingGap {
		t.Fatalf("cursor at a delta of the stopped process: ack %+v, want streaming_gap", att.Ack)
	}
	got := ids(att.Replay)
	if !slices.Contains(got, failed.ID) || !slices.Contains(got, cancelled.ID) {
		t.Fatalf("replay %v lacks the call's end %s or the cancellation %s", got, failed.ID, cancelled.ID)
	}
}

// TestSweepDropsIdleSessions: a session with no client and no event for
// the idle time loses its state (ring included): a cursor into that
// ring then reports a streaming gap. A session with a client is kept.
func TestSweepDropsIdleSessions(t *testing.T) {
	st := openStore(t)
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	e := newEnv(t, st, hub.Config{RingSize: 64, Now: func() time.Time { return *now.Load() }})
	e.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
	e.mustEmit(event.LLMCallStarted, event.ActorAgent, "turn_1")
	cursor := e.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
	e.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
	e.mustEmit(event.LLMCallCompleted, event.ActorAgent, "turn_1")
	e.mustEmit(event.TurnCompleted, event.ActorAgent, "turn_1")
	e.barrier()

	if n := e.h.Sweep(time.Hour); n != 0 {
		t.Fatalf("swept %d sessions that were active just now", n)
	}
	// With a client attached the session is kept, however idle.
	held := e.subscribe(protocol.Subscribe{Preset: event.PresetFull})
	later := start.Add(2 * time.Hour)
	now.Store(&later)
	if n := e.h.Sweep(time.Hour); n != 0 {
		t.Fatalf("swept %d sessions, want 0 while a client is attached", n)
	}
	e.h.Unsubscribe(held.Client)
	e.barrier()
	later2 := time.Now().Add(2 * time.Hour) // past the unsubscribe meta-event too
	now.Store(&later2)
	if n := e.h.Sweep(time.Hour); n != 1 {
		t.Fatalf("swept %d sessions, want 1", n)
	}
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &cursor.ID})
	if !att.Ack.StreamingGap {
		t.Fatal("a cursor into a swept ring did not report a streaming gap")
	}
}
