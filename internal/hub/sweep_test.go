package hub_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// TestSweepKeepsQuietInFlightTurn: a turn in flight but quiet (a long
// tool call) keeps its session's state however long the silence, so a
// snapshot taken after the sweep still says the turn is in flight; once
// the turn ends, the idle session is swept.
func TestSweepKeepsQuietInFlightTurn(t *testing.T) {
	st := openStore(t)
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	e := newEnv(t, st, hub.Config{RingSize: 64, Now: func() time.Time { return *now.Load() }})
	e.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
	e.mustEmit(event.ToolCalled, event.ActorTool, "turn_1")
	e.barrier()
	later := time.Now().Add(24 * time.Hour)
	now.Store(&later)
	if n := e.h.Sweep(time.Minute); n != 0 {
		t.Fatalf("swept %d sessions with a turn in flight", n)
	}
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Snapshot: true})
	var s summary
	decodeSummary(t, att.Snapshot, &s)
	if s.CurrentTurnID == nil || *s.CurrentTurnID != "turn_1" || s.CurrentTurnStatus == nil || *s.CurrentTurnStatus != "in_flight" {
		t.Fatalf("snapshot after a sweep says current turn %v / %v, want turn_1 in_flight", s.CurrentTurnID, s.CurrentTurnStatus)
	}
	e.h.Unsubscribe(att.Client)

	e.mustEmit(event.TurnCompleted, event.ActorAgent, "turn_1")
	e.barrier()
	later2 := time.Now().Add(48 * time.Hour)
	now.Store(&later2)
	if n := e.h.Sweep(time.Minute); n != 1 {
		t.Fatalf("swept %d sessions once the turn ended, want 1", n)
	}
	att = e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Snapshot: true})
	decodeSummary(t, att.Snapshot, &s)
	if s.CurrentTurnID != nil {
		t.Fatalf("snapshot after the turn ended says current turn %s", *s.CurrentTurnID)
	}
}

// TestSweepRacesSubscribeAndPublish: Sweep running flat out (every
// session eligible the moment it has no client, no turn in flight and
// no event) interleaved with subscribes, emits and unsubscribes on many
// sessions never loses a client or an event: each client receives
// exactly the events after its seam, and a replay from a cursor taken
// while sweeping still carries every catalog event.
func TestSweepRacesSubscribeAndPublish(t *testing.T) {
	st := openStore(t)
	future := time.Now().Add(time.Hour)
	base := newEnv(t, st, hub.Config{RingSize: 1 << 10, ClientQueue: 1 << 20, Now: func() time.Time { return future }})
	sessions, rounds := 6, 15
	if hub.RaceEnabled {
		sessions, rounds = 3, 5 // the race detector slows the store twentyfold
	}
	envs := []*env{base}
	for range sessions - 1 {
		envs = append(envs, base.sibling())
	}
	for _, e := range envs {
		e.mustEmit(event.SessionCreated, event.ActorSession, "")
		e.barrier()
	}
	stop := make(chan struct{})
	var sweeps atomic.Int64
	var sweeper sync.WaitGroup
	sweeper.Add(1)
	go func() {
		defer sweeper.Done()
		for {
			select {
			case <-stop:
				return
			default:
				sweeps.Add(int64(base.h.Sweep(0)))
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(envs))
	for _, e := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- sweepRound(e, rounds)
		}()
	}
	wg.Wait()
	close(stop)
	sweeper.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d sessions swept during the test", sweeps.Load())
}

// sweepRound runs rounds of: a turn emitted with no client attached
// (Sweep may drop the session's state before it starts, never after);
// a snapshot, which must say the turn is in flight; a replay from
// before the turn, which must carry every catalog event and every
// streaming one unless it reports streaming_gap; live events to an
// attached client, which must get each of them. It never calls t (it
// runs on its own goroutine).
func sweepRound(e *env, rounds int) error {
	full := matcher{preset: event.PresetFull}
	for round := range rounds {
		all, err := e.allErr()
		if err != nil {
			return err
		}
		cursor := all[len(all)-1].ID
		turn := fmt.Sprintf("turn_%d", round)
		for _, typ := range []event.Type{event.TurnStarted, event.LLMCallStarted, event.TextDelta, event.TextDelta, event.LLMCallCompleted} {
			if _, err := e.emit(typ, event.ActorAgent, turn); err != nil {
				return err
			}
		}
		if err := e.em.Barrier(e.ctx); err != nil {
			return err
		}

		att, serr := e.h.Subscribe(e.ctx, e.sid, &protocol.Subscribe{Preset: event.PresetFull, Snapshot: true})
		if serr != nil {
			return fmt.Errorf("%s round %d: subscribe: %s", e.sid, round, serr.Message)
		}
		var s summary
		if err := json.Unmarshal(att.Snapshot, &struct {
			Session *summary `json:"session"`
		}{&s}); err != nil {
			return err
		}
		if s.CurrentTurnID == nil || *s.CurrentTurnID != turn {
			return fmt.Errorf("%s round %d: snapshot says current turn %v, want %s in flight", e.sid, round, s.CurrentTurnID, turn)
		}
		e.h.Unsubscribe(att.Client)

		att, serr = e.h.Subscribe(e.ctx, e.sid, &protocol.Subscribe{Preset: event.PresetFull, Since: &cursor})
		if serr != nil {
			return fmt.Errorf("%s round %d: subscribe: %s", e.sid, round, serr.Message)
		}
		if err := att.Collect(e.ctx); err != nil {
			return err
		}
		if all, err = e.allErr(); err != nil {
			return err
		}
		want := expect(all, full, cursor, att.Seam)
		if att.Ack.StreamingGap {
			var catalog []*event.Event
			for _, ev := range want {
				if event.FamilyOf(ev.Type) == event.Catalog {
					catalog = append(catalog, ev)
				}
			}
			want = catalog
		}
		if got := ids(att.Replay); fmt.Sprint(got) != fmt.Sprint(ids(want)) {
			return fmt.Errorf("%s round %d: replay (gap %v) %v", e.sid, round, att.Ack.StreamingGap, diff(got, ids(want)))
		}
		if e.h.Clients(e.sid) == 0 {
			return fmt.Errorf("%s round %d: the client was swept away", e.sid, round)
		}
		// Catalog and streaming events interleaved, as a tool call and its
		// live output: every call ends before its turn does (a call still
		// open at a cursor would make a replay's streaming_gap true).
		for _, typ := range []event.Type{event.ToolCalled, event.ToolOutputDelta, event.ToolCompleted, event.ToolCalled, event.ToolOutputDelta, event.ToolCompleted} {
			if _, err := e.emit(typ, event.ActorTool, turn); err != nil {
				return err
			}
		}
		if _, err := e.emit(event.TurnCompleted, event.ActorAgent, turn); err != nil {
			return err
		}
		if err := e.em.Barrier(e.ctx); err != nil {
			return err
		}
		got, over := att.Client.Drain(nil)
		if over {
			return fmt.Errorf("%s round %d: overflow", e.sid, round)
		}
		if all, err = e.allErr(); err != nil {
			return err
		}
		want = expect(all, full, att.Seam, "")
		if fmt.Sprint(ids(got)) != fmt.Sprint(ids(want)) {
			return fmt.Errorf("%s round %d: live %v", e.sid, round, diff(ids(got), ids(want)))
		}
		e.h.Unsubscribe(att.Client)
	}
	return nil
}

// decodeSummary decodes a snapshot frame's session object into s.
func decodeSummary(t *testing.T, frame []byte, s *summary) {
	t.Helper()
	*s = summary{}
	if err := json.Unmarshal(decodeSnapshot(t, frame).Session, s); err != nil {
		t.Fatalf("snapshot session: %v", err)
	}
}
