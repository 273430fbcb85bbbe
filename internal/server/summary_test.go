package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

// wireSummary is the part of the session summary this test reads, with
// the new fields as raw JSON so their encoding is checked too.
type wireSummary struct {
	ID             string          `json:"id"`
	CreatedAt      time.Time       `json:"created_at"`
	Title          *string         `json:"title"`
	LastActivityAt json.RawMessage `json:"last_activity_at"`
}

func (w wireSummary) last(t *testing.T) time.Time {
	t.Helper()
	var s string
	if err := json.Unmarshal(w.LastActivityAt, &s); err != nil {
		t.Fatalf("last_activity_at %s: %v", w.LastActivityAt, err)
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("last_activity_at %q is not RFC 3339: %v", s, err)
	}
	return at
}

// TestSessionSummaryTitleAndLastActivity: every answer carrying a
// session summary (POST /sessions, GET /sessions, GET /sessions/{id}'s
// session, the snapshot's session) has title ("" before the first turn,
// then the first user message) and last_activity_at (RFC 3339, moving
// forward with each turn).
func TestSessionSummaryTitleAndLastActivity(t *testing.T) {
	h := servertest.Start(t, "")
	var created wireSummary
	if st := h.Do("POST", "/sessions", map[string]string{"workspace_path": h.Workspace}, &created); st != http.StatusCreated {
		t.Fatalf("create: status %d", st)
	}
	if created.Title == nil || *created.Title != "" || created.last(t).Before(created.CreatedAt) {
		t.Fatalf("POST /sessions: title %v, last activity %s, created %v", created.Title, created.LastActivityAt, created.CreatedAt)
	}
	sid := created.ID

	get := func() wireSummary {
		t.Helper()
		var one struct {
			Session wireSummary `json:"session"`
		}
		if st := h.Do("GET", "/sessions/"+sid, nil, &one); st != http.StatusOK {
			t.Fatalf("GET /sessions/%s: status %d", sid, st)
		}
		var list struct {
			Sessions []wireSummary `json:"sessions"`
		}
		if st := h.Do("GET", "/sessions", nil, &list); st != http.StatusOK || len(list.Sessions) != 1 {
			t.Fatalf("GET /sessions: status %d, %d sessions", st, len(list.Sessions))
		}
		l := list.Sessions[0]
		if l.Title == nil || one.Session.Title == nil || *l.Title != *one.Session.Title || !l.last(t).Equal(one.Session.last(t)) {
			t.Fatalf("GET /sessions and GET /sessions/{id} disagree: %+v, %+v", l, one.Session)
		}
		return one.Session
	}

	h.Submit(sid, "/echo what\tis   here?")
	h.WaitTurn(sid)
	first := get()
	if *first.Title != "what is here?" || !first.last(t).After(created.last(t)) {
		t.Fatalf("after the first turn: title %q, last activity %v (was %v)", *first.Title, first.last(t), created.last(t))
	}
	h.Submit(sid, "/echo and now?")
	h.WaitTurn(sid)
	second := get()
	if *second.Title != *first.Title || !second.last(t).After(first.last(t)) {
		t.Fatalf("after the second turn: title %q, last activity %v (was %v)", *second.Title, second.last(t), first.last(t))
	}

	c := streamtest.Attach(t, h.URL, sid)
	c.Subscribe("preset:chat", nil, true)
	c.Read(wait)
	snap := c.Read(wait)
	if snap.Snap == nil {
		t.Fatalf("want a snapshot, got %s", snap.Raw)
	}
	var ss wireSummary
	if err := json.Unmarshal(snap.Snap.Session, &ss); err != nil {
		t.Fatal(err)
	}
	if ss.Title == nil || *ss.Title != *second.Title || !ss.last(t).Equal(second.last(t)) {
		t.Fatalf("snapshot session %s; want title %q, last activity %v", snap.Snap.Session, *second.Title, second.last(t))
	}
}
