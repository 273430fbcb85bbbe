package hub_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// replayTree is a planner and one worker sharing its outbox, with a
// history of several store batches (the hub reads 512 catalog events a
// batch) of interleaved catalog and streaming events of both sessions.
type replayTree struct {
	*env
	worker string
	wem    *bus.Emitter
	first  string // the first event: the cursor of the tests
}

func newReplayTree(t *testing.T, cfg hub.Config) *replayTree {
	t.Helper()
	e := newEnv(t, openStore(t), cfg)
	worker := event.NewID("sess_")
	if err := e.st.Apply(e.ctx, store.CreateSession{Session: store.Session{ID: worker, ParentSessionID: e.sid}}); err != nil {
		t.Fatal(err)
	}
	wem, err := e.b.Attach(e.ctx, worker, e.sid)
	if err != nil {
		t.Fatal(err)
	}
	tr := &replayTree{env: e, worker: worker, wem: wem}
	tr.first = e.mustEmit(event.SessionCreated, event.ActorSession, "").ID
	for i := range 1300 {
		typ, actor := emitTypes[i%len(emitTypes)], actors[i%len(actors)]
		if i%3 == 0 {
			ev, err := wem.Emit(bus.Spec{Type: typ, Actor: actor, Payload: map[string]any{"i": i, "pad": strings.Repeat("x", i%700)}})
			if err != nil {
				t.Fatal(err)
			}
			if event.FamilyOf(typ) == event.Streaming {
				e.streaming = append(e.streaming, ev)
			}
			continue
		}
		e.mustEmit(typ, actor, "t")
	}
	e.barrier()
	return tr
}

// truth is every event of the tree, both families, in id order, as of
// now (each subscribe adds bus events to the planner's history).
func (tr *replayTree) truth(t *testing.T) []*event.Event {
	t.Helper()
	tr.barrier()
	stored, err := tr.st.Events(tr.ctx, store.EventQuery{SessionIDs: []string{tr.sid, tr.worker}})
	if err != nil {
		t.Fatal(err)
	}
	out := append(stored, tr.streaming...)
	slices.SortFunc(out, func(a, b *event.Event) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// TestReplayAcrossBatches: a replay longer than several store batches,
// of a planner and its worker merged by id with the ring's streaming
// events, carries every matching event of (since, seam] exactly once,
// in id order, framed from its stored bytes, with an exact count; for
// every type (whose count reads the index only), and for filters of
// some types and actors.
func TestReplayAcrossBatches(t *testing.T) {
	tr := newReplayTree(t, hub.Config{RingSize: 4096})
	chat, _ := event.Preset(event.PresetChat)
	var chatTypes []string
	for _, ty := range chat {
		chatTypes = append(chatTypes, string(ty))
	}
	for _, m := range []matcher{
		{name: "every type", preset: event.PresetFull},
		{name: "chat", types: chatTypes},
		{name: "catalog types and actors", types: []string{"tool.called", "turn.started", "route.decided"}, actors: []string{event.ActorTool, event.ActorAgent}},
		{name: "one streaming type", types: []string{"text.delta"}},
	} {
		t.Run(m.name, func(t *testing.T) {
			// A preset cannot take workers: every type is the default
			// filter's.
			sub := protocol.Subscribe{Filter: protocol.Filter{EventTypes: m.types, Actors: m.actors, IncludeWorkerSessions: true}, Since: &tr.first}
			all := tr.truth(t)
			att, serr := tr.h.Subscribe(tr.ctx, tr.sid, &sub)
			if serr != nil {
				t.Fatalf("subscribe: %s: %s", serr.Code, serr.Message)
			}
			defer tr.h.Unsubscribe(att.Client)
			if err := att.Collect(tr.ctx); err != nil {
				t.Fatal(err)
			}
			checkAttachment(t, att)
			want := expect(all, m, tr.first, att.Seam)
			if len(want) < 2*512 && m.name == "every type" {
				t.Fatalf("only %d events expected: the test does not cross batches", len(want))
			}
			sameEvents(t, m.name, att.Replay, want)
		})
	}
}

// TestReplayLimitExact: the count that decides replay_too_large is exact
// for a filter of every type too (counted from the index alone): a
// replay of exactly the limit is accepted, one more is refused.
func TestReplayLimitExact(t *testing.T) {
	tr := newReplayTree(t, hub.Config{RingSize: 4096})
	for _, over := range []bool{false, true} {
		// A hub of its own, with no ring: the replay is the stored
		// catalog events of the tree.
		want := expect(tr.truth(t), matcher{types: catalogOnly()}, tr.first, "")
		limit := len(want)
		if over {
			limit--
		}
		h := hub.New(tr.st, tr.b, hub.Config{ReplayLimit: limit, Logger: quiet})
		replayAtLimit(t, tr.ctx, h, tr.sid, protocol.Subscribe{Filter: protocol.Filter{IncludeWorkerSessions: true}, Since: &tr.first}, want, limit, over)
	}
}

func catalogOnly() []string {
	var out []string
	for _, i := range event.All() {
		if i.Family == event.Catalog {
			out = append(out, string(i.Type))
		}
	}
	return out
}

// TestReplayStopsAtError: the writer's first error ends the replay:
// StreamReplayBatches returns it once its reading goroutine has ended
// (goleak checks none is left), having handed over nothing after it.
func TestReplayStopsAtError(t *testing.T) {
	tr := newReplayTree(t, hub.Config{RingSize: 4096})
	sub := protocol.Subscribe{Preset: event.PresetFull, Since: &tr.first}
	att, serr := tr.h.Subscribe(tr.ctx, tr.sid, &sub)
	if serr != nil {
		t.Fatalf("subscribe: %s", serr.Code)
	}
	defer tr.h.Unsubscribe(att.Client)
	boom := errors.New("socket gone")
	calls, got := 0, 0
	err := att.StreamReplayBatches(tr.ctx, func(items []*hub.Item) error {
		calls++
		got += len(items)
		if calls == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 2 {
		t.Fatalf("err %v after %d calls, want %v after 2", err, calls, boom)
	}
	if got >= att.Ack.ReplayEventCount {
		t.Fatalf("%d of %d events handed over: the replay did not stop", got, att.Ack.ReplayEventCount)
	}
}
