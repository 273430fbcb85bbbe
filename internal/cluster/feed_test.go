package cluster_test

import (
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
)

func TestFeedRunsWhileTheTreeHasClients(t *testing.T) {
	s := startServer(t)
	n := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Minute})
	sink := &recorder{}
	feeds := cluster.NewFeeds(n.log, sink, nil)
	t.Cleanup(feeds.Close)
	tree := newSessionID()
	g := newEvents(t)
	publish := func() *event.Event {
		t.Helper()
		ev := g.make(tree, event.TurnStarted, "", map[string]any{})
		if _, err := n.log.PublishCatalog(ctx(t), tree, ev, nil); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	before := publish() // history: not the feed's to deliver

	leave1, err := feeds.Join(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	leave2, err := feeds.Join(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	live := publish()
	waitFor(t, func() bool { return len(sink.events()) == 1 })
	leave1()
	leave1() // idempotent
	live2 := publish()
	waitFor(t, func() bool { return len(sink.events()) == 2 })
	got := sink.events()
	if got[0].ID != live.ID || got[1].ID != live2.ID {
		t.Fatalf("feed delivered %v, %v; want %s, %s (and not %s)", got[0].ID, got[1].ID, live.ID, live2.ID, before.ID)
	}
	// The last client leaves: the consumer stops, nothing more arrives.
	leave2()
	if _, _, ok := feeds.Delivered(tree); ok {
		t.Fatal("the feed still runs after its last client left")
	}
	publish()
	time.Sleep(100 * time.Millisecond)
	if n := len(sink.events()); n != 2 {
		t.Fatalf("sink got %d events after the feed stopped, want 2", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitForWithin(t, 10*time.Second, cond)
}

// waitForWithin polls cond until it holds or d passes.
func waitForWithin(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
