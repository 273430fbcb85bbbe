package client_test

import (
	"encoding/json"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// summaryOf decodes the view's session summary.
func summaryOf(t *testing.T, v *client.View) protocol.SessionSummary {
	t.Helper()
	var s protocol.SessionSummary
	if err := json.Unmarshal(v.Session, &s); err != nil {
		t.Fatalf("summary %s: %v", v.Session, err)
	}
	return s
}

// TestSessionUpdatedKeepsTheSummaryCurrent: a rename and an archive of
// the view's session change the summary's title and archived flag
// (bringing it back removes the flag); a worker's edit, a payload that
// does not decode and an edit that names nothing leave it, and the rest
// of the summary is kept.
func TestSessionUpdatedKeepsTheSummaryCurrent(t *testing.T) {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{SnapshotAtEventID: "evt_1",
		Session: json.RawMessage(`{"id":"sess_p","title":"first prompt","mode":"plan","turn_count":2}`)})
	v.Apply(envelope("evt_2", "session.updated", "sess_p", "", `{"title":"renamed \"by hand\""}`))
	if s := summaryOf(t, v); s.Title != `renamed "by hand"` || s.Archived || s.Mode != "plan" || s.TurnCount != 2 {
		t.Fatalf("after a rename: %s", v.Session)
	}
	v.Apply(envelope("evt_3", "session.updated", "sess_p", "", `{"archived":true}`))
	if s := summaryOf(t, v); !s.Archived || s.Title != `renamed "by hand"` {
		t.Fatalf("after an archive: %s", v.Session)
	}
	for i, ev := range []*protocol.EventEnvelope{
		envelope("evt_4", "session.updated", "sess_w", "", `{"title":"a worker's"}`),
		envelope("evt_5", "session.updated", "sess_p", "", `{"title":7}`),
		envelope("evt_6", "session.updated", "sess_p", "", `{}`),
		envelope("evt_7", "session.updated", "sess_p", "", `[]`),
	} {
		before := string(v.Session)
		v.Apply(ev)
		if string(v.Session) != before {
			t.Fatalf("edit %d changed the summary: %s", i, v.Session)
		}
	}
	v.Apply(envelope("evt_8", "session.updated", "sess_p", "", `{"archived":false,"title":"back"}`))
	if s := summaryOf(t, v); s.Archived || s.Title != "back" {
		t.Fatalf("after unarchiving: %s", v.Session)
	}
	var raw map[string]any
	_ = json.Unmarshal(v.Session, &raw)
	if _, ok := raw["archived"]; ok {
		t.Fatalf("archived false is omitted, as the summary does: %s", v.Session)
	}
	if c := v.Clone(); summaryOf(t, c).Title != "back" {
		t.Fatalf("clone: %s", c.Session)
	}

	// No summary (a view built from events alone): nothing to keep current.
	w := client.NewView(nil)
	w.Apply(envelope("evt_1", "session.updated", "sess_p", "", `{"title":"x"}`))
	if len(w.Session) != 0 {
		t.Fatalf("a view without a snapshot got a summary: %s", w.Session)
	}
}
