package session_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
)

// newestEventTS is the time of the newest stored event of a session.
func newestEventTS(t *testing.T, h *servertest.Harness, sid string) time.Time {
	t.Helper()
	evs, err := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}})
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of %s: %d, %v", sid, len(evs), err)
	}
	var last time.Time
	for _, e := range evs {
		if e.TS.After(last) {
			last = e.TS
		}
	}
	return last
}

// TestSummaryTitleAndLastActivity: a new session has no title and its
// creation as last activity; the first turn names it (white space
// collapsed) and later turns leave the title as it is while the last
// activity follows the session's newest event.
func TestSummaryTitleAndLastActivity(t *testing.T) {
	h := servertest.Start(t, "")
	ctx := context.Background()
	sid := h.CreateSession()
	s0, err := h.Server.Sessions.Get(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if s0.Title != "" || s0.LastActivityAt.Before(s0.CreatedAt) || !s0.LastActivityAt.Equal(newestEventTS(t, h, sid)) {
		t.Fatalf("new session: title %q, last activity %v (created %v)", s0.Title, s0.LastActivityAt, s0.CreatedAt)
	}
	b, _ := json.Marshal(s0)
	var wire map[string]any
	json.Unmarshal(b, &wire)
	if wire["title"] != "" || wire["last_activity_at"] == nil {
		t.Fatalf("summary JSON %s", b)
	}

	h.Submit(sid, "/echo  first\n\n   question ")
	h.WaitTurn(sid)
	s1, err := h.Server.Sessions.Get(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Title != "first question" { // the /echo command is left out (store.PromptTitle)
		t.Fatalf("title after the first turn %q", s1.Title)
	}
	if !s1.LastActivityAt.After(s0.LastActivityAt) || !s1.LastActivityAt.Equal(newestEventTS(t, h, sid)) {
		t.Fatalf("last activity %v after the first turn; created at %v, newest event %v",
			s1.LastActivityAt, s0.LastActivityAt, newestEventTS(t, h, sid))
	}

	h.Submit(sid, "/echo second")
	h.WaitTurn(sid)
	s2, err := h.Server.Sessions.Get(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Title != s1.Title {
		t.Fatalf("title changed by a later turn: %q", s2.Title)
	}
	if !s2.LastActivityAt.After(s1.LastActivityAt) || !s2.LastActivityAt.Equal(newestEventTS(t, h, sid)) {
		t.Fatalf("last activity %v after the second turn, %v before", s2.LastActivityAt, s1.LastActivityAt)
	}

	// The listing carries the same fields.
	all, err := h.Server.Sessions.List(ctx)
	if err != nil || len(all) != 1 || all[0].Title != s2.Title || !all[0].LastActivityAt.Equal(s2.LastActivityAt) {
		t.Fatalf("List = %+v, %v", all, err)
	}
}

// TestSummaryTitleIsCut: a long first message gives a title of at most
// store.MaxPromptTitleRunes runes ending in "…", cut at a word.
func TestSummaryTitleIsCut(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	h.Submit(sid, "/echo "+strings.Repeat("ünïcödé ", 40))
	h.WaitTurn(sid)
	s, err := h.Server.Sessions.Get(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(s.Title); n > store.MaxPromptTitleRunes || !strings.HasSuffix(s.Title, "…") ||
		!strings.HasPrefix(s.Title, "ünïcödé ünïcödé") || !strings.HasSuffix(s.Title, "ünïcödé…") || !utf8.ValidString(s.Title) {
		t.Fatalf("title %q (%d runes)", s.Title, n)
	}
}

// TestSummaryWorkers: a worker is titled by its task (its /echo left
// out), and so is its planner, whose prompt was the delegate command; each session's
// last activity is its own newest event, so a worker's events do not
// move its planner's.
func TestSummaryWorkers(t *testing.T) {
	h := servertest.Start(t, "")
	ctx := context.Background()
	sid := h.CreateSession()
	task, _ := json.Marshal(map[string]string{"task": "/echo the worker was here"})
	h.Submit(sid, "/tool delegate "+string(task))
	h.WaitTurn(sid)
	kids, err := h.Server.Store.Children(ctx, sid)
	if err != nil || len(kids) != 1 {
		t.Fatalf("workers %+v, %v", kids, err)
	}
	wid := kids[0].ID
	h.WaitTurn(wid)
	var planner, worker session.Summary
	if planner, err = h.Server.Sessions.Get(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if worker, err = h.Server.Sessions.Get(ctx, wid); err != nil {
		t.Fatal(err)
	}
	if planner.Title != "the worker was here" || worker.Title != "the worker was here" {
		t.Fatalf("titles: planner %q, worker %q", planner.Title, worker.Title)
	}
	if !planner.LastActivityAt.Equal(newestEventTS(t, h, sid)) || !worker.LastActivityAt.Equal(newestEventTS(t, h, wid)) {
		t.Fatalf("last activity: planner %v (newest event %v), worker %v (newest event %v)",
			planner.LastActivityAt, newestEventTS(t, h, sid), worker.LastActivityAt, newestEventTS(t, h, wid))
	}
}
