package benchtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/store"
)

// The replay benchmarks replay a history of real builtin:demo turns
// with tools, so that the events are of a dozen types and sizes (from
// about 300 bytes to 4 KiB), as a real session's are.

// historyPrompts are the turns a history is made of, in turn.
var historyPrompts = []string{
	"what is in the workspace?",
	`/tool read_file {"path": "notes.md"}`,
	"/echo done, thanks",
	"and what is in src?",
	`/tool list_dir {"path": "src"}`,
}

// WriteHistoryWorkspace fills the workspace directory ws (created if
// need be) with what the history's turns read: twelve small Go files in
// src and a notes.md of about 3 KiB.
func WriteHistoryWorkspace(tb testing.TB, ws string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		tb.Fatal(err)
	}
	for i := range 12 {
		if err := os.WriteFile(filepath.Join(ws, "src", fmt.Sprintf("module_%02d.go", i)), []byte("package src\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	var notes strings.Builder
	for i := 0; notes.Len() < 3000; i++ {
		fmt.Fprintf(&notes, "Line %d of the notes: the quick brown fox jumps over the lazy dog.\n", i)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte(notes.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// RunHistory runs turns on session sid of srv (a builtin:demo session
// on a workspace WriteHistoryWorkspace filled), one after the other,
// until srv's store holds at least n events of the session, and returns
// the number of turns it ran.
func RunHistory(tb testing.TB, srv *server.Server, sid string, n int) int {
	tb.Helper()
	ctx := context.Background()
	q := store.EventQuery{SessionIDs: []string{sid}}
	turns := 0
	for i := 0; ; i++ {
		if i%20 == 0 {
			have, err := srv.Store.CountEvents(ctx, q)
			if err != nil {
				tb.Fatal(err)
			}
			if have >= n {
				return turns
			}
		}
		if _, err := srv.Sessions.Submit(ctx, sid, historyPrompts[i%len(historyPrompts)]); err != nil {
			tb.Fatal(err)
		}
		if err := srv.Sessions.Wait(ctx, sid); err != nil {
			tb.Fatal(err)
		}
		turns++
	}
}

// CatalogTypes is every catalog event type: the store-facing half of
// preset:full, which a replaying client subscribes with.
func CatalogTypes() []string {
	var out []string
	for _, i := range event.All() {
		if i.Family == event.Catalog {
			out = append(out, string(i.Type))
		}
	}
	return out
}
