package cluster_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// replayIDs returns the event ids on filter, in stream order, skipping
// ownership markers; a bad record fails the test.
func replayIDs(t *testing.T, l *cluster.Log, filter string) []string {
	t.Helper()
	var ids []string
	err := l.Replay(ctx(t), filter, 0, func(e cluster.Entry) error {
		if e.Err != nil {
			t.Errorf("seq %d: %v", e.Seq, e.Err)
			return nil
		}
		if !e.Marker {
			ids = append(ids, e.Event.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("replay %s: %v", filter, err)
	}
	return ids
}

func TestPublishRetryIsStoredOnce(t *testing.T) {
	l := openLog(t, connect(t, startServer(t)), cluster.LogConfig{})
	tree := newSessionID()
	g := newEvents(t)
	cat := g.make(tree, event.SessionCreated, "", map[string]any{})
	delta := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "hi"})

	first, err := l.PublishCatalog(ctx(t), tree, cat, nil)
	if err != nil || first.Duplicate {
		t.Fatalf("first publish: %+v %v", first, err)
	}
	again, err := l.PublishCatalog(ctx(t), tree, cat, nil)
	if err != nil {
		t.Fatalf("retried publish: %v", err)
	}
	if !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("retried publish = %+v, want a duplicate of seq %d", again, first.Seq)
	}
	d1, err := l.PublishStreaming(ctx(t), tree, delta)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := l.PublishStreaming(ctx(t), tree, delta)
	if err != nil || !d2.Duplicate || d2.Seq != d1.Seq {
		t.Fatalf("retried streaming publish = %+v %v, want a duplicate of seq %d", d2, err, d1.Seq)
	}
	if got, want := replayIDs(t, l, cluster.TreeFilter(tree)), []string{cat.ID, delta.ID}; !slices.Equal(got, want) {
		t.Fatalf("stream holds %v, want %v", got, want)
	}
}

func TestReplayByTreeSessionAndFamily(t *testing.T) {
	l := openLog(t, connect(t, startServer(t)), cluster.LogConfig{})
	tree, worker, other := newSessionID(), newSessionID(), newSessionID()
	g, og := newEvents(t), newEvents(t)
	var all, ofWorker, catalog, otherCatalog []string
	publish := func(tree string, ev *event.Event) {
		t.Helper()
		var err error
		if event.FamilyOf(ev.Type) == event.Catalog {
			_, err = l.PublishCatalog(ctx(t), tree, ev, nil)
		} else {
			_, err = l.PublishStreaming(ctx(t), tree, ev)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		for _, s := range []string{tree, worker} {
			for _, typ := range []event.Type{event.TurnStarted, event.TextDelta} {
				ev := g.make(s, typ, "turn_x", map[string]any{"i": i})
				publish(tree, ev)
				all = append(all, ev.ID)
				if s == worker {
					ofWorker = append(ofWorker, ev.ID)
				}
				if typ == event.TurnStarted {
					catalog = append(catalog, ev.ID)
				}
			}
		}
		ev := og.make(other, event.TurnStarted, "turn_y", map[string]any{"i": i})
		publish(other, ev)
		otherCatalog = append(otherCatalog, ev.ID)
	}
	if got := replayIDs(t, l, cluster.TreeFilter(tree)); !slices.Equal(got, all) {
		t.Errorf("tree replay = %v\nwant %v", got, all)
	}
	if !slices.IsSorted(all) {
		t.Fatal("test events not in id order")
	}
	if got := replayIDs(t, l, cluster.SessionFilter(tree, worker)); !slices.Equal(got, ofWorker) {
		t.Errorf("session replay = %v\nwant %v", got, ofWorker)
	}
	if got := replayIDs(t, l, cluster.CatalogFilter(tree)); !slices.Equal(got, catalog) {
		t.Errorf("catalog replay = %v\nwant %v", got, catalog)
	}
	if got := replayIDs(t, l, cluster.CatalogFilter(other)); !slices.Equal(got, otherCatalog) {
		t.Errorf("other tree's catalog replay = %v\nwant %v", got, otherCatalog)
	}
	if got := replayIDs(t, l, cluster.AllCatalog); len(got) != len(catalog)+len(otherCatalog) {
		t.Errorf("all catalog replay has %d events, want %d", len(got), len(catalog)+len(otherCatalog))
	}
	if got := replayIDs(t, l, cluster.TreeFilter(newSessionID())); len(got) != 0 {
		t.Errorf("replay of an unknown tree = %v, want nothing", got)
	}
}

func TestReplayFromSequence(t *testing.T) {
	l := openLog(t, connect(t, startServer(t)), cluster.LogConfig{})
	tree := newSessionID()
	g := newEvents(t)
	var seqs []uint64
	var ids []string
	for range 5 {
		ev := g.make(tree, event.TurnStarted, "turn_1", map[string]any{})
		p, err := l.PublishCatalog(ctx(t), tree, ev, nil)
		if err != nil {
			t.Fatal(err)
		}
		seqs, ids = append(seqs, p.Seq), append(ids, ev.ID)
	}
	var got []string
	if err := l.Replay(ctx(t), cluster.TreeFilter(tree), cluster.ReadFrom(seqs[2]), func(e cluster.Entry) error {
		got = append(got, e.Event.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ids[2:]) {
		t.Fatalf("replay from seq %d = %v, want %v", seqs[2], got, ids[2:])
	}
}

func TestStreamingEventsExpire(t *testing.T) {
	l := openLog(t, connect(t, startServer(t)), cluster.LogConfig{StreamingTTL: time.Second})
	tree := newSessionID()
	g := newEvents(t)
	c1 := g.make(tree, event.TurnStarted, "turn_1", map[string]any{})
	d := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "x"})
	c2 := g.make(tree, event.TurnCompleted, "turn_1", map[string]any{})
	p1, err := l.PublishCatalog(ctx(t), tree, c1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.PublishStreaming(ctx(t), tree, d); err != nil {
		t.Fatal(err)
	}
	p2, err := l.PublishCatalog(ctx(t), tree, c2, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The delta lives for a second; wait (generously) until it is gone.
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := replayIDs(t, l, cluster.TreeFilter(tree))
		if slices.Equal(got, []string{c1.ID, c2.ID}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the TTL the tree holds %v, want only the catalog events", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The expired delta leaves a sequence gap between the catalog events.
	if p2.Seq-p1.Seq != 2 {
		t.Fatalf("catalog sequences %d and %d: want the delta's sequence between them", p1.Seq, p2.Seq)
	}
}

func TestPublishRefusesWrongFamilyAndBadIDs(t *testing.T) {
	l := openLog(t, connect(t, startServer(t)), cluster.LogConfig{})
	tree := newSessionID()
	g := newEvents(t)
	cat := g.make(tree, event.TurnStarted, "", map[string]any{})
	delta := g.make(tree, event.TextDelta, "", map[string]any{})
	if _, err := l.PublishStreaming(ctx(t), tree, cat); err == nil {
		t.Error("a catalog event published as streaming was accepted")
	}
	if _, err := l.PublishCatalog(ctx(t), tree, delta, nil); err == nil {
		t.Error("a streaming event published as catalog was accepted")
	}
	for _, bad := range []string{"", "a.b", "a*", ">", "_owner", "a b"} {
		if _, err := l.PublishCatalog(ctx(t), bad, cat, nil); err == nil {
			t.Errorf("tree %q accepted", bad)
		}
	}
}

func TestFencedPublishRefusesStaleWriter(t *testing.T) {
	nc := connect(t, startServer(t))
	l := openLog(t, nc, cluster.LogConfig{})
	tree := newSessionID()
	g := newEvents(t)

	old, err := l.Claim(ctx(t), tree, "node-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	first := g.make(tree, event.TurnStarted, "turn_1", map[string]any{})
	if _, err := old.PublishCatalog(ctx(t), first, nil); err != nil {
		t.Fatalf("owner's publish: %v", err)
	}
	// Streaming events do not move the fence.
	if _, err := l.PublishStreaming(ctx(t), tree, g.make(tree, event.TextDelta, "turn_1", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	if _, err := old.PublishCatalog(ctx(t), g.make(tree, event.LLMCallStarted, "turn_1", map[string]any{}), nil); err != nil {
		t.Fatalf("owner's publish after a delta: %v", err)
	}

	// Another node takes the tree (it holds the lease now).
	next, err := l.Claim(ctx(t), tree, "node-b", 2)
	if err != nil {
		t.Fatal(err)
	}
	stale := g.make(tree, event.TurnCompleted, "turn_1", map[string]any{})
	_, err = old.PublishCatalog(ctx(t), stale, nil)
	var fe *cluster.FencedError
	if !errors.Is(err, cluster.ErrFenced) || !errors.As(err, &fe) {
		t.Fatalf("stale owner's publish: %v, want a FencedError", err)
	}
	if fe.Tree != tree || fe.Event != stale.ID {
		t.Errorf("FencedError = %+v", fe)
	}
	// Fenced for good, even if the tree's tail were to come back.
	if _, err := old.PublishCatalog(ctx(t), g.make(tree, event.TurnCompleted, "turn_1", map[string]any{}), nil); !errors.Is(err, cluster.ErrFenced) {
		t.Fatalf("second stale publish: %v, want ErrFenced", err)
	}
	// The new owner writes on.
	if _, err := next.PublishCatalog(ctx(t), g.make(tree, event.TurnCancelled, "turn_1", map[string]any{"reason": "owner_lost"}), nil); err != nil {
		t.Fatalf("new owner's publish: %v", err)
	}
	for _, id := range replayIDs(t, l, cluster.TreeFilter(tree)) {
		if id == stale.ID {
			t.Fatal("the refused event is in the log")
		}
	}
	// A fence on another tree is independent.
	otherTree := newSessionID()
	f, err := l.Claim(ctx(t), otherTree, "node-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.PublishCatalog(ctx(t), newEvents(t).make(otherTree, event.TurnStarted, "", map[string]any{}), nil); err != nil {
		t.Fatalf("publish on another tree: %v", err)
	}
}

func TestFencedRetryIsADuplicateNotARefusal(t *testing.T) {
	l := openLog(t, connect(t, startServer(t)), cluster.LogConfig{})
	tree := newSessionID()
	g := newEvents(t)
	f, err := l.Claim(ctx(t), tree, "node-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	ev := g.make(tree, event.TurnStarted, "turn_1", map[string]any{})
	ops := []store.Op{store.PutTurn{Turn: store.Turn{ID: "turn_1", SessionID: tree, Status: store.TurnInFlight}}, store.AppendEvent{Event: ev}}
	p1, err := f.PublishCatalog(ctx(t), ev, ops)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := f.PublishCatalog(ctx(t), ev, ops)
	if err != nil {
		t.Fatalf("retry through the fence: %v", err)
	}
	if !p2.Duplicate || p2.Seq != p1.Seq {
		t.Fatalf("retry = %+v, want a duplicate of %d", p2, p1.Seq)
	}
	if _, err := f.PublishCatalog(ctx(t), g.make(tree, event.TurnCompleted, "turn_1", map[string]any{}), nil); err != nil {
		t.Fatalf("publish after the retry: %v", err)
	}
}
