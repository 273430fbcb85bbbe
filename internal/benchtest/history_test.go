package benchtest_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
)

// TestHistoryAndCursor: RunHistory runs builtin:demo turns with tools
// until the session holds the events asked for, and the cursor names
// the id after which exactly n of them are stored, also after more were
// appended, and refuses an n that many events do not exceed.
func TestHistoryAndCursor(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = 0 })
	ctx := context.Background()
	ws := filepath.Join(t.TempDir(), "workspace")
	benchtest.WriteHistoryWorkspace(t, ws)
	sum, err := h.Server.Sessions.Create(ctx, session.CreateRequest{WorkspacePath: ws, Model: "builtin:demo"})
	if err != nil {
		t.Fatal(err)
	}
	turns := benchtest.RunHistory(t, h.Server, sum.ID, 60)
	ids := storedIDs(t, h.Server.Store, sum.ID)
	if turns == 0 || len(ids) < 60 {
		t.Fatalf("%d turns, %d events", turns, len(ids))
	}
	var types []event.Type
	evs, err := h.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sum.ID}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if !slices.Contains(types, e.Type) {
			types = append(types, e.Type)
		}
	}
	if !slices.Contains(types, event.ToolCalled) || len(types) < 6 {
		t.Errorf("a history of %d event types, no tool call: %v", len(types), types)
	}

	cur := benchtest.NewCursor(h.Server.Store, sum.ID)
	since, err := cur.Since(10)
	if err != nil {
		t.Fatal(err)
	}
	if want := ids[len(ids)-11]; since != want {
		t.Errorf("Since(10) = %s, want %s", since, want)
	}
	benchtest.RunHistory(t, h.Server, sum.ID, len(ids)+1) // at least one more turn
	ids = storedIDs(t, h.Server.Store, sum.ID)
	if since, err = cur.Since(10); err != nil || since != ids[len(ids)-11] {
		t.Errorf("Since(10) after more turns = %s, %v; want %s", since, err, ids[len(ids)-11])
	}
	if _, err := cur.Since(len(ids)); err == nil {
		t.Errorf("Since(%d) of %d events: no error", len(ids), len(ids))
	}
	if got := benchtest.CatalogTypes(); !slices.Contains(got, string(event.ToolCalled)) || slices.Contains(got, string(event.TextDelta)) {
		t.Errorf("CatalogTypes() = %v", got)
	}
}

func storedIDs(t *testing.T, st *store.Store, sid string) []string {
	t.Helper()
	var ids []string
	err := st.ScanEvents(context.Background(), store.EventQuery{SessionIDs: []string{sid}}, func(r store.EventRow) error {
		ids = append(ids, r.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
