package tui

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// header is the screen's first line.
func (h *harness) header() string { return strings.Split(h.screen(), "\n")[0] }

// attachTitled subscribes the harness to a snapshot of the session
// titled title; the events after it are numbered from 1.
func (h *harness) attachTitled(title string) *client.View {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session:           []byte(`{"id":"` + testSession + `","title":"` + title + `"}`),
		SnapshotAtEventID: "evt_00000000000000000000000000",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v.Clone()})
	h.frame()
	return v
}

// sessionUpdated queues a session.updated of session sid.
func (h *harness) sessionUpdated(sid string, edit protocol.SessionEdit) {
	h.n++
	ev := &protocol.EventEnvelope{ID: fmt.Sprintf("evt_%026d", h.n), Type: string(protocol.EventSessionUpdated), SessionID: sid,
		TS: time.Now().UTC().Format(time.RFC3339Nano), Actor: "user", Payload: mustJSON(h.t, edit)}
	h.update(client.Update{Kind: client.EventApplied, Event: ev})
}

func TestHeaderShowsTheServersTitle(t *testing.T) {
	h := newHarness(t)
	h.api.title = "Fix the flaky test"
	h.turnStarted("turn_1", "**fix** the\nflaky   test in `store_test.go` please, it fails about one run in ten")
	h.frameTitle()
	if header := h.header(); !strings.Contains(header, "metis · Fix the flaky test · "+testSession) || strings.Contains(header, "please") {
		t.Fatalf("header %q", header)
	}
}

// TestARenameElsewhereShowsInTheHeaderAtOnce: another client's rename
// and archive (session.updated) change the header in the next frame,
// without asking the server and without waiting for a turn; a worker's
// rename leaves it.
func TestARenameElsewhereShowsInTheHeaderAtOnce(t *testing.T) {
	h := newHarness(t)
	h.attachTitled("first prompt")
	h.sessionUpdated(testSession, protocol.SessionEdit{Title: ptr("renamed elsewhere")})
	h.frame()
	if header := h.header(); !strings.Contains(header, "metis · renamed elsewhere · "+testSession) {
		t.Fatalf("header after a rename %q", header)
	}
	if h.m.titleFetch() != nil {
		t.Fatal("a rename asked the server for the title")
	}

	h.sessionUpdated(testSession, protocol.SessionEdit{Archived: ptr(true)})
	h.frame()
	if header := h.header(); !strings.Contains(header, "metis · renamed elsewhere (archived) · "+testSession) {
		t.Fatalf("header after an archive %q", header)
	}
	h.sessionUpdated("sess_worker", protocol.SessionEdit{Title: ptr("a worker's"), Archived: ptr(false)})
	h.frame()
	if header := h.header(); !strings.Contains(header, "metis · renamed elsewhere (archived) · ") {
		t.Fatalf("a worker's edit changed the header: %q", header)
	}
	h.sessionUpdated(testSession, protocol.SessionEdit{Archived: ptr(false)})
	h.frame()
	if header := h.header(); strings.Contains(header, "archived") || !strings.Contains(header, "metis · renamed elsewhere · ") {
		t.Fatalf("header after unarchiving %q", header)
	}
}

// TestATitleAnswerOlderThanARenameIsDropped: the title asked for when a
// turn started comes back after a rename was seen; the rename stays.
func TestATitleAnswerOlderThanARenameIsDropped(t *testing.T) {
	h := newHarness(t)
	h.attachTitled("")
	h.api.title = "derived from the prompt"
	h.turnStarted("turn_1", "derived from the prompt")
	h.m.frame(time.Now())
	ask := h.m.titleFetch()
	if ask == nil {
		t.Fatal("the first turn did not ask for the title")
	}
	answer := ask() // answered before the rename, delivered after it
	h.sessionUpdated(testSession, protocol.SessionEdit{Title: ptr("renamed")})
	h.frame()
	h.m.Update(answer)
	if header := h.header(); !strings.Contains(header, "metis · renamed · ") {
		t.Fatalf("header %q", header)
	}
}

// TestARenameMissedWhileDisconnectedShowsAfterTheReplay: Follow's view
// after a replay holds the rename made while the TUI was away (the
// replayed session.updated folded into its summary): the header takes
// it when the subscription is back.
func TestARenameMissedWhileDisconnectedShowsAfterTheReplay(t *testing.T) {
	h := newHarness(t)
	v := h.attachTitled("before")
	h.update(client.Update{Kind: client.Reconnecting, Attempt: 1})
	h.frame()
	v.Apply(&protocol.EventEnvelope{ID: "evt_00000000000000000000000001", Type: string(protocol.EventSessionUpdated), SessionID: testSession,
		TS: time.Now().UTC().Format(time.RFC3339Nano), Actor: "user", Payload: mustJSON(t, protocol.SessionEdit{Title: ptr("renamed while away")})})
	h.update(client.Update{Kind: client.Subscribed, View: v.Clone(), Resumed: true})
	h.frame()
	if header := h.header(); !strings.Contains(header, "metis · renamed while away · ") {
		t.Fatalf("header after the replay %q", header)
	}
}

func TestAnOlderTitleAnswerDoesNotWinOverANewerOne(t *testing.T) {
	h := newHarness(t)
	h.m.titled(titleMsg{seq: 2, title: "new"})
	h.m.titled(titleMsg{seq: 1, title: "old"})
	h.m.titled(titleMsg{seq: 3, err: fmt.Errorf("refused")})
	if h.m.title != "new" {
		t.Fatalf("title %q", h.m.title)
	}
}

func TestTitleComesFromTheSnapshot(t *testing.T) {
	h := newHarness(t)
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session:           []byte(`{"id":"` + testSession + `","title":"Renamed by hand"}`),
		SnapshotAtEventID: "evt_00000000000000000000000009",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	if header := strings.Split(h.screen(), "\n")[0]; !strings.Contains(header, "metis · Renamed by hand · ") {
		t.Fatalf("header %q", header)
	}
}

func ptr[T any](v T) *T { return &v }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
