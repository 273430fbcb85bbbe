package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
)

// readNode is a node that reads: its store, kept by its projection, and
// its feeds into a recording sink.
type readNode struct {
	*node
	st    *store.Store
	cst   *countingStore
	proj  *cluster.Projection
	sink  *recorder
	feeds *cluster.Feeds
	stop  func()
}

func newReadNode(t *testing.T, s *server.Server, name, dir string) *readNode {
	t.Helper()
	n := newNode(t, s, name, cluster.LeaseConfig{TTL: time.Minute})
	st, err := store.Open(ctx(t), store.Options{Path: filepath.Join(dir, "metis.db")})
	if err != nil {
		t.Fatal(err)
	}
	rn := &readNode{node: n, st: st, cst: &countingStore{Store: st}, sink: &recorder{}}
	rn.feeds = cluster.NewFeeds(n.log, rn.sink, nil)
	rn.start(t)
	t.Cleanup(func() {
		rn.stop()
		rn.feeds.Close()
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return rn
}

// start runs a fresh projection on the node's store.
func (rn *readNode) start(t *testing.T) {
	rn.proj = cluster.NewProjection(rn.log, rn.cst, "", nil)
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rn.proj.Run(pctx) }()
	var once sync.Once
	rn.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("projection: %v", err)
			}
		})
	}
}

// countingStore counts the events a projection submits, and the groups
// (submissions) they came in.
type countingStore struct {
	*store.Store
	appends atomic.Int64
	groups  atomic.Int64
}

func (c *countingStore) Submit(ops []store.Op, done func(error)) {
	c.groups.Add(1)
	for _, op := range ops {
		if _, ok := op.(store.AppendEvent); ok {
			c.appends.Add(1)
		}
	}
	c.Store.Submit(ops, done)
}

type recorder struct {
	mu  sync.Mutex
	evs []*event.Event
}

func (r *recorder) Publish(ev *event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *recorder) events() []*event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// turn publishes, as the tree's owner would, a session's creation and
// one complete turn with streaming deltas; it returns every event and
// the sequence of the last catalog one.
func publishTurn(t *testing.T, o *cluster.Owner, g *events, sid string, text string) ([]*event.Event, uint64) {
	t.Helper()
	var out []*event.Event
	var last uint64
	now := time.Now().UTC().Truncate(time.Microsecond)
	turnID := event.NewID("turn_")
	cat := func(typ event.Type, turn string, payload any, ops ...store.Op) {
		ev := g.make(sid, typ, turn, payload)
		for i, op := range ops {
			if st, ok := op.(store.EventStamper); ok {
				ops[i] = st.StampEvent(ev.ID)
			}
		}
		p, err := o.PublishCatalog(ctx(t), ev, append(ops, store.AppendEvent{Event: ev}))
		if err != nil {
			t.Fatalf("publish %s: %v", typ, err)
		}
		out, last = append(out, ev), p.Seq
	}
	stream := func(typ event.Type, payload any) {
		ev := g.make(sid, typ, turnID, payload)
		if err := o.PublishStreamingAsync(ev); err != nil {
			t.Fatalf("publish %s: %v", typ, err)
		}
		out = append(out, ev)
	}
	if sid == o.Tree() && len(g.published) == 0 {
		cat(event.SessionCreated, "", map[string]any{"workspace_path": "/w"},
			store.CreateSession{Session: store.Session{ID: sid, WorkspacePath: "/w", ActiveModel: "builtin:demo", CreatedAt: now, LastActivityAt: now}})
	}
	user := message.Message{ID: event.NewID("msg_"), SessionID: sid, TurnID: turnID, Role: message.RoleUser, Content: []message.Block{message.Text(text)}, Status: message.StatusComplete, CreatedAt: now}
	cat(event.TurnStarted, turnID, map[string]any{"user_message": user},
		store.PutTurn{Turn: store.Turn{ID: turnID, SessionID: sid, Status: store.TurnInFlight, StartedAt: now}},
		store.PutMessage{Message: user}, store.SetTitle{SessionID: sid, Title: text})
	stream(event.MessageStart, map[string]any{})
	for _, w := range []string{"echo", ": ", text} {
		stream(event.TextDelta, map[string]any{"text": w})
	}
	reply := message.Message{ID: event.NewID("msg_"), SessionID: sid, TurnID: turnID, Role: message.RoleAssistant,
		Content: []message.Block{message.Text("echo: " + text)}, Status: message.StatusComplete, Usage: &message.Usage{InputTokens: 3, OutputTokens: 2, CostUSD: 0.001}, CreatedAt: now}
	stream(event.MessageComplete, map[string]any{})
	cat(event.LLMCallCompleted, turnID, map[string]any{"message_id": reply.ID}, store.PutMessage{Message: reply})
	cat(event.TurnCompleted, turnID, map[string]any{},
		store.PutTurn{Turn: store.Turn{ID: turnID, SessionID: sid, Status: store.TurnCompleted, StartedAt: now, EndedAt: now.Add(time.Second)}},
		store.AddUsage{SessionID: sid, CostUSD: 0.001, Turns: 1})
	g.published = append(g.published, out...)
	return out, last
}

// sameState fails the test unless two stores serve the same session
// identically: summary, messages, turns and stored events.
func sameState(t *testing.T, a, b *store.Store, sid string, turnIDs []string) {
	t.Helper()
	sa, err := a.Session(ctx(t), sid)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Session(ctx(t), sid)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa, sb) {
		t.Errorf("session summary differs:\n%+v\n%+v", sa, sb)
	}
	ma, moreA, err := a.Messages(ctx(t), sid, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	mb, moreB, err := b.Messages(ctx(t), sid, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ma) == 0 || !reflect.DeepEqual(ma, mb) || moreA != moreB {
		t.Errorf("messages differ:\n%+v\n%+v", ma, mb)
	}
	for _, id := range turnIDs {
		ta, errA := a.Turn(ctx(t), id)
		tb, errB := b.Turn(ctx(t), id)
		if errA != nil || errB != nil || !reflect.DeepEqual(ta, tb) {
			t.Errorf("turn %s differs: %+v (%v) / %+v (%v)", id, ta, errA, tb, errB)
		}
	}
	ea, err := a.Events(ctx(t), store.EventQuery{SessionIDs: []string{sid}})
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.Events(ctx(t), store.EventQuery{SessionIDs: []string{sid}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ea) != len(eb) {
		t.Fatalf("stored events: %d and %d", len(ea), len(eb))
	}
	for i := range ea {
		if !bytes.Equal(ea[i].JSON(), eb[i].JSON()) {
			t.Errorf("stored event %d differs:\n%s\n%s", i, ea[i].JSON(), eb[i].JSON())
		}
	}
}

func turnIDsOf(evs []*event.Event) []string {
	var ids []string
	for _, ev := range evs {
		if ev.Type == event.TurnStarted {
			ids = append(ids, ev.TurnID)
		}
	}
	return ids
}

func catalogOf(evs []*event.Event) []*event.Event {
	var out []*event.Event
	for _, ev := range evs {
		if event.FamilyOf(ev.Type) == event.Catalog {
			out = append(out, ev)
		}
	}
	return out
}

func TestEventsPublishedByOneNodeAreServedIdenticallyByAnother(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	b := newReadNode(t, s, "node-b", t.TempDir())
	tree := newSessionID()
	leave, err := b.feeds.Join(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()

	owner := a.own(t, tree)
	g := newEvents(t)
	first, _ := publishTurn(t, owner, g, tree, "hello")
	second, last := publishTurn(t, owner, g, tree, "again")
	all := append(first, second...)

	for _, n := range []*readNode{a, b} {
		if err := n.proj.WaitApplied(ctx(t), last); err != nil {
			t.Fatalf("%s: %v", n.name, err)
		}
	}
	sameState(t, a.st, b.st, tree, turnIDsOf(all))
	msgs, _, err := b.st.Messages(ctx(t), tree, "", 100)
	if err != nil || len(msgs) != 4 {
		t.Fatalf("node-b serves %d messages (%v), want 4", len(msgs), err)
	}
	stored, err := b.st.Events(ctx(t), store.EventQuery{SessionIDs: []string{tree}})
	if err != nil {
		t.Fatal(err)
	}
	if want := catalogOf(all); len(stored) != len(want) {
		t.Fatalf("node-b stored %d events, want the %d catalog ones", len(stored), len(want))
	}

	// node-b's clients get every event of the tree, both families, in
	// order and byte for byte.
	deadline := time.Now().Add(10 * time.Second)
	for len(b.sink.events()) < len(all) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := b.sink.events()
	if len(got) != len(all) {
		t.Fatalf("node-b's sink got %d events, want %d", len(got), len(all))
	}
	for i := range all {
		if !bytes.Equal(got[i].JSON(), all[i].JSON()) {
			t.Errorf("event %d: got %s\nwant %s", i, got[i].JSON(), all[i].JSON())
		}
	}
	if _, cat, ok := b.feeds.Delivered(tree); !ok || cat != last {
		t.Errorf("feed delivered catalog seq %d (%v), want %d", cat, ok, last)
	}
	// node-a has no clients of the tree: no feed, nothing in its sink.
	if _, _, ok := a.feeds.Delivered(tree); ok || len(a.sink.events()) != 0 {
		t.Error("node-a runs a feed it was not asked for")
	}
}

func TestProjectionResumesAfterRestartAndRebuildsFromScratch(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	dirB := t.TempDir()
	b := newReadNode(t, s, "node-b", dirB)
	tree := newSessionID()
	owner := a.own(t, tree)
	g := newEvents(t)
	first, last := publishTurn(t, owner, g, tree, "one")
	if err := b.proj.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}

	// node-b's projection stops (the node restarts) while the tree goes
	// on; it resumes from its cursor, applying each event once.
	b.stop()
	second, last := publishTurn(t, owner, g, tree, "two")
	before := b.cst.appends.Load()
	b.start(t)
	if err := b.proj.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}
	if err := a.proj.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}
	if n := b.cst.appends.Load() - before; n != int64(len(catalogOf(second))) {
		t.Fatalf("the restarted projection submitted %d events, want only the %d new ones", n, len(catalogOf(second)))
	}
	all := append(first, second...)
	sameState(t, a.st, b.st, tree, turnIDsOf(all))
	if n, err := b.st.CountEvents(ctx(t), store.EventQuery{SessionIDs: []string{tree}}); err != nil || n != len(catalogOf(all)) {
		t.Fatalf("node-b holds %d events (%v), want %d", n, err, len(catalogOf(all)))
	}

	// A node with an empty store rebuilds everything from the log.
	c := newReadNode(t, s, "node-c", t.TempDir())
	if err := c.proj.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}
	sameState(t, a.st, c.st, tree, turnIDsOf(all))
	if c.proj.Skipped() != 0 || b.proj.Skipped() != 0 {
		t.Errorf("skipped records: %d, %d", b.proj.Skipped(), c.proj.Skipped())
	}
}

func TestWaitAppliedStopsWithItsContextOrTheProjection(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	short, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	if err := a.proj.WaitApplied(short, 1_000_000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the log's end: %v, want a deadline error", err)
	}
	a.stop()
	if err := a.proj.WaitApplied(ctx(t), 1_000_000); !errors.Is(err, cluster.ErrProjectionStopped) {
		t.Fatalf("wait on a stopped projection: %v, want ErrProjectionStopped", err)
	}
}

func TestProjectionSkipsBadRecordsAndGoesOn(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	nc := connect(t, s)
	tree := newSessionID()
	if _, err := nc.Request(cluster.Subject(tree, tree, event.Catalog), []byte("garbage"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	owner := a.own(t, tree)
	_, last := publishTurn(t, owner, newEvents(t), tree, "after garbage")
	if err := a.proj.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}
	if a.proj.Skipped() != 1 {
		t.Fatalf("skipped %d records, want 1", a.proj.Skipped())
	}
	if msgs, _, err := a.st.Messages(ctx(t), tree, "", 10); err != nil || len(msgs) != 2 {
		t.Fatalf("messages after a bad record: %d (%v), want 2", len(msgs), err)
	}
}
