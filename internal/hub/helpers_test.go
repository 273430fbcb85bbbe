package hub_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// tb is what *testing.T and *rapid.T share.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// timeout bounds every wait of the tests (and a test's whole context):
// nothing should come near it, even under the race detector on a loaded
// machine.
const timeout = 2 * time.Minute

func ctxT(t tb) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// openStore opens a real SQLite trace store in a temporary directory,
// closed when the test ends. A test shares it between rapid iterations
// (one session each) to stay fast.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{Path: filepath.Join(t.TempDir(), "trace.db"), Logger: quiet})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("store.Close: %v", err)
		}
	})
	return st
}

// env is one session served by a real bus and a hub over a real store.
type env struct {
	t   tb
	ctx context.Context
	st  *store.Store
	b   *bus.Bus
	h   *hub.Hub
	sid string
	em  *bus.Emitter

	mu        sync.Mutex
	streaming []*event.Event // every streaming event emitted (never stored)
}

// startHub starts a bus over st and a hub as its live sink, as a
// process does; the bus is closed when the test ends.
func startHub(t tb, st *store.Store, cfg hub.Config) (*bus.Bus, *hub.Hub) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	b := bus.New(st, bus.Options{Logger: quiet})
	h := hub.New(st, b, cfg)
	b.AddLive(h)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := b.Close(cctx); err != nil {
			t.Errorf("bus.Close: %v", err)
		}
	})
	return b, h
}

func newEnv(t tb, st *store.Store, cfg hub.Config) *env {
	t.Helper()
	ctx := ctxT(t)
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	b, h := startHub(t, st, cfg)
	sid := event.NewID("sess_")
	if err := st.Apply(ctx, store.CreateSession{Session: store.Session{ID: sid, WorkspacePath: "/work/" + sid,
		ActiveModel: "test:model", RoutingPolicyVersion: "v1", CreatedAt: time.Now()}}); err != nil {
		t.Fatalf("create session: %v", err)
	}
	em, err := b.Emitter(ctx, sid)
	if err != nil {
		t.Fatalf("emitter: %v", err)
	}
	return &env{t: t, ctx: ctx, st: st, b: b, h: h, sid: sid, em: em}
}

// restart closes the env's bus, as a process that stops, and serves the
// same session from the same store with a new bus and hub (cfg), as the
// next process does: it opens the session from its stored history.
func (e *env) restart(cfg hub.Config) {
	e.t.Helper()
	if err := e.b.Close(e.ctx); err != nil {
		e.t.Fatalf("close the bus: %v", err)
	}
	e.b, e.h = startHub(e.t, e.st, cfg)
	em, err := e.b.Emitter(e.ctx, e.sid)
	if err != nil {
		e.t.Fatalf("emitter: %v", err)
	}
	e.em = em
}

// emit emits one event and records it if it is a streaming one. It is
// safe for concurrent use and never calls t (goroutines report errors).
func (e *env) emit(typ event.Type, actor, turn string, ops ...store.Op) (*event.Event, error) {
	ev, err := e.em.Emit(bus.Spec{Type: typ, Actor: actor, TurnID: turn, Payload: map[string]string{"k": "v"}, Ops: ops})
	if err != nil {
		return nil, err
	}
	if event.FamilyOf(typ) == event.Streaming {
		e.mu.Lock()
		e.streaming = append(e.streaming, ev)
		e.mu.Unlock()
	}
	return ev, nil
}

func (e *env) mustEmit(typ event.Type, actor, turn string, ops ...store.Op) *event.Event {
	e.t.Helper()
	ev, err := e.emit(typ, actor, turn, ops...)
	if err != nil {
		e.t.Fatalf("emit %s: %v", typ, err)
	}
	return ev
}

func (e *env) barrier() {
	e.t.Helper()
	if err := e.em.Barrier(e.ctx); err != nil {
		e.t.Fatalf("barrier: %v", err)
	}
}

// all returns every event of the session, both families, in id order:
// the store's catalog events (meta-events included) merged with the
// streaming events the test emitted. Call it after a barrier.
func (e *env) all() []*event.Event {
	e.t.Helper()
	out, err := e.allErr()
	if err != nil {
		e.t.Fatalf("%v", err)
	}
	return out
}

// allErr is all for goroutines: it reports instead of failing.
func (e *env) allErr() ([]*event.Event, error) {
	stored, err := e.st.Events(e.ctx, store.EventQuery{SessionIDs: []string{e.sid}})
	if err != nil {
		return nil, fmt.Errorf("store events: %w", err)
	}
	e.mu.Lock()
	out := append(stored, e.streaming...)
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b *event.Event) int { return strings.Compare(a.ID, b.ID) })
	for i := 1; i < len(out); i++ {
		if out[i].ID == out[i-1].ID {
			return nil, fmt.Errorf("event %s twice in the ground truth", out[i].ID)
		}
	}
	return out, nil
}

func (e *env) subscribe(sub protocol.Subscribe) *hub.Attachment {
	e.t.Helper()
	att, serr := e.h.Subscribe(e.ctx, e.sid, &sub)
	if serr != nil {
		e.t.Fatalf("subscribe %+v: %s: %s", sub, serr.Code, serr.Message)
	}
	if err := att.Collect(e.ctx); err != nil {
		e.t.Fatalf("replay: %v", err)
	}
	checkAttachment(e.t, att)
	return att
}

// checkAttachment checks what holds for every accepted subscribe: the
// ack's count is the replay's length, replayed items are strictly
// increasing and within the seam, a snapshot is stamped with the seam.
func checkAttachment(t tb, att *hub.Attachment) {
	t.Helper()
	if att.Ack.Type != protocol.TypeSubscribeAck {
		t.Fatalf("ack type %q", att.Ack.Type)
	}
	if att.Ack.SeamEventID != att.Seam {
		t.Fatalf("ack seam_event_id %q, seam %q", att.Ack.SeamEventID, att.Seam)
	}
	if att.Ack.ReplayEventCount != len(att.Replay) {
		t.Fatalf("ack replay_event_count %d, replay has %d", att.Ack.ReplayEventCount, len(att.Replay))
	}
	checkIncreasing(t, "replay", att.Replay)
	for _, it := range att.Replay {
		if it.ID > att.Seam {
			t.Fatalf("replayed %s after the seam %s", it.ID, att.Seam)
		}
		if att.Ack.Since != nil && it.ID <= *att.Ack.Since {
			t.Fatalf("replayed %s at or before the cursor %s", it.ID, *att.Ack.Since)
		}
	}
	if att.Snapshot != nil {
		s := decodeSnapshot(t, att.Snapshot)
		if s.SnapshotAtEventID != att.Seam {
			t.Fatalf("snapshot_at_event_id %s, seam %s", s.SnapshotAtEventID, att.Seam)
		}
	}
}

func checkIncreasing(t tb, what string, items []*hub.Item) {
	t.Helper()
	for i := 1; i < len(items); i++ {
		if items[i].ID <= items[i-1].ID {
			t.Fatalf("%s not strictly increasing at %d: %s then %s", what, i, items[i-1].ID, items[i].ID)
		}
	}
}

// drain takes the client's live items, which must all follow the seam,
// and fails on overflow.
func drain(t tb, att *hub.Attachment) []*hub.Item {
	t.Helper()
	items, over := att.Client.Drain(nil)
	if over {
		t.Fatalf("client %s overflowed", att.Client.Name)
	}
	for _, it := range items {
		if it.ID <= att.Seam {
			t.Fatalf("live item %s at or before the seam %s", it.ID, att.Seam)
		}
	}
	return items
}

// matcher is the test's own reading of a filter.
type matcher struct {
	name   string
	preset string
	types  []string // explicit list when preset == ""
	actors []string // nil: every actor
	// session, if set, keeps that session's events only, and the
	// approval events of the others (a subscribe without workers, of a
	// tree whose ground truth has them).
	session string
}

func (m matcher) subscribe() protocol.Subscribe {
	if m.preset != "" {
		return protocol.Subscribe{Preset: m.preset}
	}
	return protocol.Subscribe{Filter: protocol.Filter{EventTypes: m.types, Actors: m.actors}}
}

func (m matcher) typeSet() map[event.Type]bool {
	set := map[event.Type]bool{}
	if m.preset != "" {
		ts, _ := event.Preset(m.preset)
		for _, t := range ts {
			set[t] = true
		}
		return set
	}
	for _, t := range m.types {
		set[event.Type(t)] = true
	}
	return set
}

func (m matcher) match(ev *event.Event) bool {
	return m.typeSet()[ev.Type] && (m.actors == nil || slices.Contains(m.actors, ev.Actor)) &&
		(m.session == "" || ev.SessionID == m.session || reachesPlanners(ev.Type))
}

// reachesPlanners: a worker's approval events reach its planner's
// clients whatever their filter says of workers.
func reachesPlanners(t event.Type) bool {
	return t == event.ApprovalRequested || t == event.ApprovalResolved
}

// checkResolved: the ack's resolved filter is the requested one, presets
// expanded.
func (m matcher) checkResolved(t tb, f protocol.Filter) {
	t.Helper()
	want := m.typeSet()
	got := map[event.Type]bool{}
	for _, s := range f.EventTypes {
		got[event.Type(s)] = true
	}
	if len(got) != len(f.EventTypes) || len(got) != len(want) {
		t.Fatalf("%s: resolved types %v, want %d distinct", m.name, f.EventTypes, len(want))
	}
	for ty := range want {
		if !got[ty] {
			t.Fatalf("%s: resolved types %v lack %s", m.name, f.EventTypes, ty)
		}
	}
	if !slices.Equal(f.Actors, m.actors) || (f.Actors == nil) != (m.actors == nil) {
		t.Fatalf("%s: resolved actors %v, want %v", m.name, f.Actors, m.actors)
	}
}

// Types and actors the tests emit.
var (
	catalogTypes   = []event.Type{event.ToolCalled, event.TurnStarted, event.TurnCompleted, event.RouteDecided, event.LLMCallStarted, event.FeedbackSubmitted}
	streamingTypes = []event.Type{event.TextDelta, event.MessageStart, event.ThinkingDelta, event.ToolUseInputDelta}
	emitTypes      = append(slices.Clone(catalogTypes), streamingTypes...)
	actors         = []string{event.ActorAgent, event.ActorModel, event.ActorTool, event.ActorUser}
)

func allTypeNames() []string {
	var out []string
	for _, i := range event.All() {
		out = append(out, string(i.Type))
	}
	return out
}

// matcherGen draws a filter: a preset, or an explicit type subset
// (biased toward the emitted types) with or without an actor subset.
func matcherGen() *rapid.Generator[matcher] {
	return rapid.Custom(func(t *rapid.T) matcher {
		switch rapid.IntRange(0, 3).Draw(t, "filterKind") {
		case 0:
			return matcher{name: "preset:chat", preset: event.PresetChat}
		case 1:
			return matcher{name: "preset:full", preset: event.PresetFull}
		}
		pool := allTypeNames()
		if rapid.Bool().Draw(t, "emittedOnly") {
			pool = nil
			for _, ty := range emitTypes {
				pool = append(pool, string(ty))
			}
		}
		m := matcher{types: rapid.SliceOfNDistinct(rapid.SampledFrom(pool), 1, 6, rapid.ID[string]).Draw(t, "types")}
		if rapid.Bool().Draw(t, "byActor") {
			m.actors = rapid.SliceOfNDistinct(rapid.SampledFrom(append(slices.Clone(actors), event.ActorBus)), 1, 3, rapid.ID[string]).Draw(t, "actors")
		}
		m.name = fmt.Sprintf("types=%v actors=%v", m.types, m.actors)
		return m
	})
}

// emission is one drawn emit.
type emission struct {
	typ   event.Type
	actor string
}

func emissionGen() *rapid.Generator[emission] {
	return rapid.Custom(func(t *rapid.T) emission {
		return emission{typ: rapid.SampledFrom(emitTypes).Draw(t, "type"), actor: rapid.SampledFrom(actors).Draw(t, "actor")}
	})
}

func ids[T interface{ *event.Event | *hub.Item }](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		switch v := any(x).(type) {
		case *event.Event:
			out[i] = v.ID
		case *hub.Item:
			out[i] = v.ID
		}
	}
	return out
}

// expect returns the events after cursor (exclusive; "" for all) up to
// upTo (inclusive; "" for no bound) matching m.
func expect(all []*event.Event, m matcher, cursor, upTo string) []*event.Event {
	var out []*event.Event
	for _, ev := range all {
		if ev.ID > cursor && (upTo == "" || ev.ID <= upTo) && m.match(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// sameEvents fails unless got carries exactly want, in order, each item
// framed from the event's own bytes.
func sameEvents(t tb, what string, got []*hub.Item, want []*event.Event) {
	t.Helper()
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("%s:\n got  %d %v\n want %d %v\n%s", what, len(got), short(ids(got)), len(want), short(ids(want)), diff(ids(got), ids(want)))
	}
	for i := range got {
		if f := protocol.EventFrame(want[i].JSON()); !bytes.Equal(got[i].Frame, f) {
			t.Fatalf("%s: frame of %s:\n got  %s\n want %s", what, got[i].ID, got[i].Frame, f)
		}
		if got[i].Type != want[i].Type || got[i].Actor != want[i].Actor || got[i].SessionID != want[i].SessionID {
			t.Fatalf("%s: item %s is %s/%s/%s, want %s/%s/%s", what, got[i].ID, got[i].Type, got[i].Actor, got[i].SessionID,
				want[i].Type, want[i].Actor, want[i].SessionID)
		}
	}
}

// short abbreviates ids to their last 6 characters for failure output.
func short(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x[max(0, len(x)-6):]
	}
	return out
}

func diff(got, want []string) string {
	g, w := map[string]bool{}, map[string]bool{}
	for _, x := range got {
		g[x] = true
	}
	for _, x := range want {
		w[x] = true
	}
	var missing, extra []string
	for _, x := range want {
		if !g[x] {
			missing = append(missing, x)
		}
	}
	for _, x := range got {
		if !w[x] {
			extra = append(extra, x)
		}
	}
	return fmt.Sprintf(" missing %v\n extra %v", short(missing), short(extra))
}

// metaEvents returns the session's stored events of type typ whose
// subscription_name is name.
func (e *env) metaEvents(typ event.Type, name string) []map[string]any {
	e.t.Helper()
	evs, err := e.st.Events(e.ctx, store.EventQuery{SessionIDs: []string{e.sid}, Types: []event.Type{typ}})
	if err != nil {
		e.t.Fatalf("store events: %v", err)
	}
	var out []map[string]any
	for _, ev := range evs {
		var p map[string]any
		if err := ev.DecodePayload(&p); err != nil {
			e.t.Fatalf("%s payload: %v", typ, err)
		}
		if p["subscription_name"] == name {
			out = append(out, p)
		}
	}
	return out
}

// waitMeta polls the store (flushing the bus between reads, so there is
// no sleep) until a meta-event about name appears.
func (e *env) waitMeta(typ event.Type, name string) []map[string]any {
	e.t.Helper()
	for {
		if err := e.b.Flush(e.ctx); err != nil {
			e.t.Fatalf("waiting for %s of %s: %v", typ, name, err)
		}
		if got := e.metaEvents(typ, name); len(got) > 0 {
			return got
		}
	}
}

// sibling returns an env for a new session served by the same bus and
// hub.
func (e *env) sibling() *env {
	e.t.Helper()
	sid := event.NewID("sess_")
	if err := e.st.Apply(e.ctx, store.CreateSession{Session: store.Session{ID: sid, WorkspacePath: "/work/" + sid,
		ActiveModel: "test:model", CreatedAt: time.Now()}}); err != nil {
		e.t.Fatalf("create session: %v", err)
	}
	em, err := e.b.Emitter(e.ctx, sid)
	if err != nil {
		e.t.Fatalf("emitter: %v", err)
	}
	return &env{t: e.t, ctx: e.ctx, st: e.st, b: e.b, h: e.h, sid: sid, em: em}
}

// replayAtLimit subscribes to sid with sub on a hub whose replay limit
// is limit: over, it wants replay_too_large; otherwise the replay is
// exactly want.
func replayAtLimit(t *testing.T, ctx context.Context, h *hub.Hub, sid string, sub protocol.Subscribe, want []*event.Event, limit int, over bool) {
	t.Helper()
	att, serr := h.Subscribe(ctx, sid, &sub)
	if over {
		if serr == nil || serr.Code != protocol.CodeReplayTooLarge {
			t.Fatalf("%d events, limit %d: want replay_too_large, got %+v", len(want), limit, serr)
		}
		return
	}
	if serr != nil {
		t.Fatalf("%d events, limit %d: %s: %s", len(want), limit, serr.Code, serr.Message)
	}
	if err := att.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "replay at the limit", att.Replay, want)
	h.Unsubscribe(att.Client)
}
