package cluster_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
)

// gapRecorder is a feed's sink that also records the gaps it is told
// of, in order with the events.
type gapRecorder struct {
	mu  sync.Mutex
	log []string // "event <id>" or "gap <through>"
}

func (r *gapRecorder) Publish(ev *event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, "event "+ev.ID)
}

func (r *gapRecorder) Gap(tree, through string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, "gap "+through)
}

func (r *gapRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// TestDeposedOwnersLateEventsAreDropped: node a owns a tree and streams;
// node b takes the tree (its lease expired: a was paused) and writes its
// marker; a, which has not noticed, sends one more streaming event (not
// fenced by the stream). A feed that runs through the change, one that
// starts after it and a backfill read (Log.Streaming) all leave that
// late event out and count it; b's events go on.
func TestDeposedOwnersLateEventsAreDropped(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Second, Renew: time.Hour})
	b := newNode(t, s, "node-b", cluster.LeaseConfig{TTL: time.Second, Renew: liveRenew})
	tree := newSessionID()
	g := newEvents(t)
	sink := &recorder{}
	feeds := cluster.NewFeeds(b.log, sink, nil)
	t.Cleanup(feeds.Close)
	leave, err := feeds.Join(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()

	oa := a.own(t, tree)
	before := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "a"})
	if err := oa.PublishStreamingAsync(before); err != nil {
		t.Fatal(err)
	}
	ob := b.ownEventually(t, tree) // a's lease expired: b claims the tree
	late := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "late"})
	if err := oa.PublishStreamingAsync(late); err != nil {
		t.Fatalf("a's unfenced late publish: %v", err)
	}
	ob.Follow(late.ID) // b's ids sort after a's, as a take seeds them
	after := g.make(tree, event.TurnCancelled, "turn_1", map[string]any{"reason": "owner_lost"})
	if _, err := ob.PublishCatalog(ctx(t), after, nil); err != nil {
		t.Fatal(err)
	}
	next := g.make(tree, event.TextDelta, "turn_2", map[string]any{"text": "b"})
	if err := ob.PublishStreamingAsync(next); err != nil {
		t.Fatal(err)
	}

	want := []string{before.ID, after.ID, next.ID}
	waitFor(t, func() bool { return len(sink.events()) >= 3 })
	time.Sleep(100 * time.Millisecond)
	if got := streamtestIDs(sink.events()); !slices.Equal(got, want) {
		t.Fatalf("the running feed delivered %v, want %v (not a's late %s)", got, want, late.ID)
	}
	if n := feeds.Late(); n != 1 {
		t.Fatalf("late events counted: %d, want 1", n)
	}

	// A backfill read of the tree's streaming events leaves it out too.
	evs, _, err := b.log.Streaming(ctx(t), tree, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	if got := streamtestIDs(evs); !slices.Equal(got, []string{before.ID, next.ID}) {
		t.Fatalf("streaming events read back: %v, want %s and %s", got, before.ID, next.ID)
	}

	// A feed started after the change (on another node) starts at the
	// tail, knowing the tree's epoch: a's later sends are dropped too.
	sink2 := &recorder{}
	feeds2 := cluster.NewFeeds(a.log, sink2, nil)
	t.Cleanup(feeds2.Close)
	leave2, err := feeds2.Join(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	defer leave2()
	later := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "later"})
	if err := oa.PublishStreamingAsync(later); err != nil {
		t.Fatal(err)
	}
	last := g.make(tree, event.TextDelta, "turn_2", map[string]any{"text": "b2"})
	if err := ob.PublishStreamingAsync(last); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(sink2.events()) >= 1 })
	time.Sleep(100 * time.Millisecond)
	if got := streamtestIDs(sink2.events()); !slices.Equal(got, []string{last.ID}) {
		t.Fatalf("a feed started after the change delivered %v, want only %s", got, last.ID)
	}
}

// TestFeedTellsItsSinkOfEventsThatNeverReachedTheLog: an owner's
// streaming event that never reached the log (here: one it counted as
// sent but did not send) shows as a gap at the next event a feed gets,
// whose previous event is not the one the feed handed over last: the
// sink is told (through the lost event's id) before that event, and the
// gap is counted.
func TestFeedTellsItsSinkOfEventsThatNeverReachedTheLog(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Minute})
	tree := newSessionID()
	g := newEvents(t)
	sink := &gapRecorder{}
	feeds := cluster.NewFeeds(a.log, sink, nil)
	t.Cleanup(feeds.Close)
	leave, err := feeds.Join(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	o := a.own(t, tree)
	first := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "1"})
	lost := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "2"})
	third := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "3"})
	if err := o.PublishStreamingAsync(first); err != nil {
		t.Fatal(err)
	}
	o.Follow(lost.ID) // sent as far as the owner knows; the log never got it
	if err := o.PublishStreamingAsync(third); err != nil {
		t.Fatal(err)
	}
	want := []string{"event " + first.ID, "gap " + lost.ID, "event " + third.ID}
	waitFor(t, func() bool { return len(sink.lines()) >= 3 })
	if got := sink.lines(); !slices.Equal(got, want) {
		t.Fatalf("the sink got %v, want %v", got, want)
	}
	if n := feeds.Gaps(); n != 1 {
		t.Fatalf("gaps counted: %d, want 1", n)
	}
}

// TestConfirmHoldsAnOwnerThatMayHaveBeenDeposed: an owner whose last
// confirmed renewal is more than half its lease's TTL old (it was
// paused) confirms its lease with a renewal before it goes on; if
// another node took the lease meanwhile, Confirm fails with
// ErrLeaseLost and the owner stops.
func TestConfirmHoldsAnOwnerThatMayHaveBeenDeposed(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: 2 * time.Second, Renew: time.Hour})
	b := newNode(t, s, "node-b", cluster.LeaseConfig{TTL: 2 * time.Second})
	tree := newSessionID()
	o := a.own(t, tree)
	if !o.Lease().Fresh() {
		t.Fatal("a lease just taken is not fresh")
	}
	o.Lease().AgeForTest(1500 * time.Millisecond) // paused for 1.5 s: the lease is still a's
	if o.Lease().Fresh() {
		t.Fatal("a lease confirmed 1.5 s ago (TTL 2 s) counts as fresh")
	}
	if err := o.Confirm(ctx(t)); err != nil {
		t.Fatalf("confirm a lease nobody took: %v", err)
	}
	if !o.Lease().Fresh() {
		t.Fatal("the lease is not fresh after Confirm renewed it")
	}

	// a "sleeps" past its TTL: b takes the tree.
	b.ownEventually(t, tree)
	o.Lease().AgeForTest(time.Hour)
	err := o.Confirm(ctx(t))
	if !errors.Is(err, cluster.ErrLeaseLost) {
		t.Fatalf("confirm a lease another node took: %v, want ErrLeaseLost", err)
	}
	if o.Context().Err() == nil {
		t.Fatal("the owner still runs after Confirm found its lease lost")
	}
}

func streamtestIDs(evs []*event.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}
