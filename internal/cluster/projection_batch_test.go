package cluster_test

import (
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// TestProjectionAppliesABacklogInFewGroups: a node whose store is empty
// rebuilds a log of many events in a few groups (transactions), not one
// per event, and ends up with the same state as a node that applied
// them as they came. A backlog whose events the store already holds
// (the cursor moved back) falls back to one entry at a time and only
// moves the cursor.
func TestProjectionAppliesABacklogInFewGroups(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	tree := newSessionID()
	owner := a.own(t, tree)
	g := newEvents(t)
	var all []*event.Event
	var last uint64
	for range 40 {
		evs, l := publishTurn(t, owner, g, tree, "again")
		all, last = append(all, evs...), l
	}
	catalog := len(catalogOf(all))

	c := newReadNode(t, s, "node-c", t.TempDir())
	if err := c.proj.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}
	if err := a.proj.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}
	if groups := c.cst.groups.Load(); groups*2 > int64(catalog) {
		t.Errorf("the rebuild committed %d events in %d groups, want at most half as many groups", catalog, groups)
	}
	if n := c.cst.appends.Load(); n != int64(catalog) {
		t.Errorf("the rebuild submitted %d events, want %d", n, catalog)
	}
	sameState(t, a.st, c.st, tree, turnIDsOf(all))

	// Back to the start: every event is in the store already, so each
	// batch fails as a whole and its entries are applied one by one,
	// moving the cursor only.
	c.stop()
	if err := c.st.Apply(ctx(t), store.SetCursor{Name: "cluster.projection", Seq: 0}); err != nil {
		t.Fatal(err)
	}
	if cur, err := c.st.Cursor(ctx(t), "cluster.projection"); err != nil || cur != 0 {
		t.Fatalf("projection cursor %d (%v) after moving it back to 0", cur, err)
	}
	before := c.cst.groups.Load()
	c.start(t)
	if err := c.proj.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}
	if n, err := c.st.CountEvents(ctx(t), store.EventQuery{SessionIDs: []string{tree}}); err != nil || n != catalog {
		t.Fatalf("after replaying the log again the store holds %d events (%v), want %d", n, err, catalog)
	}
	if cur, err := c.st.Cursor(ctx(t), "cluster.projection"); err != nil || uint64(cur) != last {
		t.Fatalf("projection cursor %d (%v), want %d", cur, err, last)
	}
	if c.proj.Skipped() != 0 {
		t.Errorf("skipped %d records", c.proj.Skipped())
	}
	if groups := c.cst.groups.Load() - before; groups <= int64(catalog) {
		t.Errorf("the second pass submitted %d groups: the failed batches were not applied one entry at a time", groups)
	}
	sameState(t, a.st, c.st, tree, turnIDsOf(all))
}
