package hub_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// chain is one logical client across reconnects: what it asked for
// first, and everything it has been handed since, in order.
type chain struct {
	m        matcher
	cursor   string // events after it are owed to the client
	att      *hub.Attachment
	received []*hub.Item
	reconns  int
}

// last is the id the client would reconnect with.
func (c *chain) last() string {
	if n := len(c.received); n > 0 {
		return c.received[n-1].ID
	}
	return c.cursor
}

// take appends the attachment's replay, as a transport writes it first.
func (c *chain) take(t tb, att *hub.Attachment) {
	t.Helper()
	if n := len(c.received); n > 0 && len(att.Replay) > 0 && att.Replay[0].ID <= c.received[n-1].ID {
		t.Fatalf("replay starts at %s, not after the last received %s", att.Replay[0].ID, c.received[n-1].ID)
	}
	c.att = att
	c.received = append(c.received, att.Replay...)
}

func (c *chain) drain(t tb) {
	t.Helper()
	c.received = append(c.received, drain(t, c.att)...)
}

// TestSeamExactlyOnce is the seam property (spec §3.6, §3.7): for any
// interleaving of emits (from the test goroutine and from concurrent
// emitters, both families, several actors) with attaches (snapshot,
// live-only, or replay from an id the test has seen delivered), partial
// drains and reconnects (unsubscribe, then subscribe with since = the
// last id received), every client ends up with exactly the events after
// its first cursor that match its filter: each once, in strictly
// increasing id order, none missing at any seam; replay and live are
// byte-identical frames of the same events. The ring and queues are
// large enough that nothing is evicted or overflows.
func TestSeamExactlyOnce(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		e := newEnv(rt, st, hub.Config{ClientQueue: 1 << 20, RingSize: 1 << 20})
		first := e.mustEmit(event.SessionCreated, event.ActorSession, "")
		e.barrier()
		// Cursors a client could hold: ids delivered before a barrier, and
		// ids clients received.
		seen := []string{first.ID}

		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range rapid.IntRange(0, 3).Draw(rt, "emitters") {
			plan := rapid.SliceOfN(emissionGen(), 0, 40).Draw(rt, fmt.Sprintf("emitter%d", g))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, em := range plan {
					if _, err := e.emit(em.typ, em.actor, "turn_bg"); err != nil {
						errs <- err
						return
					}
				}
			}()
		}

		var chains []*chain
		var pending []string // emitted by this goroutine since the last barrier
		steps := rapid.IntRange(1, 50).Draw(rt, "steps")
		for i := range steps {
			label := func(s string) string { return fmt.Sprintf("%s%d", s, i) }
			switch op := rapid.IntRange(0, 9).Draw(rt, label("op")); {
			case op <= 4: // emit
				em := emissionGen().Draw(rt, label("emit"))
				pending = append(pending, e.mustEmit(em.typ, em.actor, "turn_fg").ID)
			case op == 5: // barrier: what this goroutine emitted is delivered
				e.barrier()
				seen = append(seen, pending...)
				pending = pending[:0]
			case op == 6: // attach a new client
				if len(chains) >= 4 {
					continue
				}
				m := matcherGen().Draw(rt, label("filter"))
				sub := m.subscribe()
				c := &chain{m: m}
				switch mode := rapid.IntRange(0, 2).Draw(rt, label("mode")); mode {
				case 0:
					sub.Snapshot = true
				case 1: // live only
				case 2:
					since := seen[rapid.IntRange(0, len(seen)-1).Draw(rt, label("since"))]
					sub.Since, c.cursor = &since, since
				}
				att := e.subscribe(sub)
				m.checkResolved(rt, att.Ack.ResolvedFilter)
				if sub.Since == nil {
					c.cursor = att.Seam
				}
				if att.Ack.StreamingGap {
					rt.Fatalf("streaming gap with a ring holding everything")
				}
				c.take(rt, att)
				chains = append(chains, c)
			case op == 7 || op == 8: // the writer drains a client
				if len(chains) == 0 {
					continue
				}
				c := chains[rapid.IntRange(0, len(chains)-1).Draw(rt, label("drain"))]
				c.drain(rt)
				if n := len(c.received); n > 0 {
					seen = append(seen, c.received[n-1].ID)
				}
			case op == 9: // reconnect: drop the connection, resubscribe with since
				if len(chains) == 0 {
					continue
				}
				c := chains[rapid.IntRange(0, len(chains)-1).Draw(rt, label("reconnect"))]
				c.drain(rt)
				e.h.Unsubscribe(c.att.Client)
				since := c.last()
				sub := c.m.subscribe()
				sub.Since = &since
				att := e.subscribe(sub)
				if att.Ack.StreamingGap {
					rt.Fatalf("streaming gap with a ring holding everything")
				}
				c.take(rt, att)
				c.reconns++
			}
		}

		wg.Wait()
		close(errs)
		for err := range errs {
			rt.Fatalf("concurrent emit: %v", err)
		}
		e.barrier()
		all := e.all()
		for i, c := range chains {
			c.drain(rt)
			want := expect(all, c.m, c.cursor, "")
			checkIncreasing(rt, fmt.Sprintf("client %d", i), c.received)
			sameEvents(rt, fmt.Sprintf("client %d (%s, cursor %s, %d reconnects)", i, c.m.name, c.cursor, c.reconns), c.received, want)
		}
		if got := e.h.Clients(e.sid); got != len(chains) {
			rt.Fatalf("hub has %d clients, test attached %d", got, len(chains))
		}
	})
}

// TestReplayMerge: for any mix of catalog and streaming events and any
// cursor, the replay merges the store's catalog events with the ring's
// streaming events strictly by id: nothing reordered, nothing missing,
// nothing extra; the same holds while other goroutines keep emitting
// during the subscribe (the seam bounds the replay).
func TestReplayMerge(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		e := newEnv(rt, st, hub.Config{RingSize: 1 << 20})
		var emitted []string
		for _, em := range rapid.SliceOfN(emissionGen(), 1, 80).Draw(rt, "before") {
			emitted = append(emitted, e.mustEmit(em.typ, em.actor, "t").ID)
		}
		e.barrier()
		concurrent := rapid.SliceOfN(emissionGen(), 0, 40).Draw(rt, "during")
		done := make(chan error, 1)
		go func() {
			for _, em := range concurrent {
				if _, err := e.emit(em.typ, em.actor, "t"); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		m := matcherGen().Draw(rt, "filter")
		since := emitted[rapid.IntRange(0, len(emitted)-1).Draw(rt, "since")]
		sub := m.subscribe()
		sub.Since = &since
		att := e.subscribe(sub)
		if err := <-done; err != nil {
			rt.Fatalf("concurrent emit: %v", err)
		}
		e.barrier()
		if att.Seam < emitted[len(emitted)-1] {
			rt.Fatalf("seam %s before the last delivered event %s", att.Seam, emitted[len(emitted)-1])
		}
		all := e.all()
		sameEvents(rt, "replay", att.Replay, expect(all, m, since, att.Seam))
		sameEvents(rt, "live", drain(rt, att), expect(all, m, att.Seam, ""))
	})
}

// TestFilterReplayEqualsLive: a filter selects the same events, as the
// same frames, whether they reach a client live or by replay.
func TestFilterReplayEqualsLive(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		e := newEnv(rt, st, hub.Config{ClientQueue: 1 << 20, RingSize: 1 << 20})
		first := e.mustEmit(event.SessionCreated, event.ActorSession, "")
		e.barrier()
		m := matcherGen().Draw(rt, "filter")
		live := e.subscribe(m.subscribe())
		for _, em := range rapid.SliceOfN(emissionGen(), 0, 60).Draw(rt, "events") {
			e.mustEmit(em.typ, em.actor, "t")
		}
		e.barrier()
		sub := m.subscribe()
		sub.Since = &first.ID
		replayed := e.subscribe(sub)
		e.barrier()
		got := drain(rt, live)
		upTo := slices.IndexFunc(got, func(it *hub.Item) bool { return it.ID > replayed.Seam })
		if upTo < 0 {
			upTo = len(got)
		}
		var liveAfter []*hub.Item
		for _, it := range got[:upTo] {
			if it.ID > first.ID {
				liveAfter = append(liveAfter, it)
			}
		}
		if !slices.Equal(ids(liveAfter), ids(replayed.Replay)) {
			rt.Fatalf("live %v\nreplay %v", short(ids(liveAfter)), short(ids(replayed.Replay)))
		}
		for i := range liveAfter {
			if string(liveAfter[i].Frame) != string(replayed.Replay[i].Frame) {
				rt.Fatalf("frame of %s differs:\n live   %s\n replay %s", liveAfter[i].ID, liveAfter[i].Frame, replayed.Replay[i].Frame)
			}
		}
		all := e.all()
		sameEvents(rt, "live", got, expect(all, m, live.Seam, ""))
	})
}

// TestFutureCursor: a cursor after everything the session (its tree)
// delivered or stored is refused with invalid_cursor, whatever its
// time, unless the stored history ends inside a model call or a tool
// call and this process has given the session no id yet: then it may be
// a delta of an earlier process whose clock ran ahead, and it is
// accepted with streaming_gap (for a filter with streaming types); every
// id given afterwards sorts after it, so every later event reaches the
// client. A process that has already given ids before such a cursor
// refuses it (those events would sort before what the client holds).
func TestFutureCursor(t *testing.T) {
	st := openStore(t)
	cfg := hub.Config{RingSize: 16}
	e := newEnv(t, st, cfg)
	e.mustEmit(event.SessionCreated, event.ActorSession, "")
	e.barrier()
	// A cursor a second ahead of the clock: every id the emitter hands
	// out during the test sorts before it.
	seq, err := event.NewSequencer("", func() time.Time { return time.Now().Add(time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	future, _ := seq.Next()
	e.refused(protocol.Subscribe{Preset: event.PresetFull, Since: &future}, protocol.CodeInvalidCursor)
	// A cursor from a clock far behind, but still after the last id.
	last := e.em.LastDelivered()
	behind, err := event.NewSequencer(last, func() time.Time { return time.Unix(0, 0) })
	if err != nil {
		t.Fatal(err)
	}
	next, _ := behind.Next() // the next id within the last one's millisecond
	e.refused(protocol.Subscribe{Preset: event.PresetFull, Since: &next}, protocol.CodeInvalidCursor)
	// The last id itself is fine: nothing to replay, no gap.
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &last})
	if att.Ack.StreamingGap || len(att.Replay) != 0 {
		t.Fatalf("cursor at the seam: ack %+v", att.Ack)
	}
	e.h.Unsubscribe(att.Client)

	// A process that stopped inside a model call; the next one has given
	// no id yet: the cursor is accepted.
	e.mustEmit(event.TurnStarted, event.ActorSession, "t")
	e.mustEmit(event.LLMCallStarted, event.ActorAgent, "t")
	e.barrier()
	e.restart(cfg)
	future, _ = seq.Next()
	att = e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &future})
	if !att.Ack.StreamingGap {
		t.Fatalf("ack %+v: want streaming_gap", att.Ack)
	}
	catalogOnly := e.subscribe(protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{"turn.completed"}}, Since: &future})
	if catalogOnly.Ack.StreamingGap {
		t.Fatalf("ack %+v: streaming_gap for a filter with no streaming type", catalogOnly.Ack)
	}
	for range 10 {
		e.mustEmit(event.TextDelta, event.ActorModel, "t")
	}
	e.barrier()
	// Every one of them, though this clock is a second behind the cursor's.
	var deltas []*hub.Item
	for _, it := range drain(t, att) {
		if it.ID <= future {
			t.Fatalf("client with cursor %s got %s", future, it.ID)
		}
		if it.Type == event.TextDelta {
			deltas = append(deltas, it)
		}
	}
	if len(deltas) != 10 {
		t.Fatalf("client with cursor %s got %d of the 10 deltas", future, len(deltas))
	}

	// This process has now given ids (all after that cursor); a later
	// cursor, which some of them precede, is refused, though the call is
	// open.
	future, _ = seq.Next()
	e.refused(protocol.Subscribe{Preset: event.PresetFull, Since: &future}, protocol.CodeInvalidCursor)

	// Inside a tool call too (a shell command streams its output); once
	// it ended, such a cursor is refused again.
	e.mustEmit(event.LLMCallCompleted, event.ActorAgent, "t")
	e.mustEmit(event.ToolCalled, event.ActorAgent, "t")
	e.barrier()
	e.restart(cfg)
	future, _ = seq.Next()
	inTool := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &future})
	if !inTool.Ack.StreamingGap {
		t.Fatalf("cursor past the seam inside a tool call: ack %+v, want streaming_gap", inTool.Ack)
	}
	e.h.Unsubscribe(inTool.Client)
	e.mustEmit(event.ToolCompleted, event.ActorAgent, "t")
	e.barrier()
	e.restart(cfg)
	future, _ = seq.Next()
	e.refused(protocol.Subscribe{Preset: event.PresetFull, Since: &future}, protocol.CodeInvalidCursor)

	// A cursor more than a minute ahead of this clock is refused even
	// where it could be placed: the session's ids would move that far.
	e.mustEmit(event.ToolCalled, event.ActorAgent, "t")
	e.barrier()
	e.restart(cfg)
	far, err := event.NewSequencer("", func() time.Time { return time.Now().Add(2 * time.Minute) })
	if err != nil {
		t.Fatal(err)
	}
	farAhead, _ := far.Next()
	e.refused(protocol.Subscribe{Preset: event.PresetFull, Since: &farAhead}, protocol.CodeInvalidCursor)
}

// TestSessionsIsolated: clients of one session never see another
// session's events, however the sessions' emits interleave, and each
// session's own stream stays exact.
func TestSessionsIsolated(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		a := newEnv(rt, st, hub.Config{ClientQueue: 1 << 20, RingSize: 1 << 10})
		envs := []*env{a, a.sibling(), a.sibling()}
		var atts []*hub.Attachment
		for _, e := range envs {
			atts = append(atts, e.subscribe(protocol.Subscribe{Preset: event.PresetFull}))
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(envs))
		for i, e := range envs {
			plan := rapid.SliceOfN(emissionGen(), 0, 30).Draw(rt, fmt.Sprintf("session%d", i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, em := range plan {
					if _, err := e.emit(em.typ, em.actor, "t"); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			rt.Fatal(err)
		}
		for i, e := range envs {
			e.barrier()
			got := drain(rt, atts[i])
			for _, it := range got {
				if it.SessionID != e.sid {
					rt.Fatalf("client of %s got %s of %s", e.sid, it.ID, it.SessionID)
				}
			}
			sameEvents(rt, fmt.Sprintf("session %d", i), got, expect(e.all(), matcher{preset: event.PresetFull}, atts[i].Seam, ""))
		}
	})
}
