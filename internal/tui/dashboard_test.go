package tui

import (
	"context"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// The status line names the browser dashboard's page of the session,
// after the keys and the in-process server's note when there is one.
func TestStatusLineShowsTheDashboardURL(t *testing.T) {
	for _, note := range []string{"", "in-process server on 127.0.0.1:8421 (stops when you quit)"} {
		ctx, cancel := context.WithCancel(context.Background())
		m := newModel(ctx, &fakeAPI{turn: "turn_1"}, newFeed(), options{sessionID: testSession, workspace: "/ws",
			note: withDashboard(note, "http://127.0.0.1:8421", testSession)})
		m.Update(tea.WindowSizeMsg{Width: 240, Height: 40})
		got := ansi.Strip(m.statusView())
		want := "dashboard http://127.0.0.1:8421/#/s/" + testSession
		if !strings.Contains(got, want) {
			t.Errorf("status line %q lacks %q", got, want)
		}
		if note != "" && !strings.Contains(got, " · "+note+" · ") {
			t.Errorf("status line %q lost the note %q", got, note)
		}
		if !strings.HasPrefix(got, keyHints) {
			t.Errorf("status line %q does not start with the keys", got)
		}
		cancel()
	}
}

// Over the unix socket there is no dashboard URL to show: a browser
// cannot open a socket.
func TestNoDashboardURLOverTheSocket(t *testing.T) {
	if got := withDashboard("", "unix:///home/me/.metis/metis.sock", testSession); got != "" {
		t.Errorf("note %q over the socket", got)
	}
	if got := withDashboard("note", "unix:///home/me/.metis/metis.sock", testSession); got != "note" {
		t.Errorf("note %q over the socket", got)
	}
}

// The keys stay on the status line at 120 columns, however long the
// in-process server's note and the dashboard's URL are: they come
// first, and the truncation cuts the note.
func TestKeyHintsSurviveTheInProcessNoteAt120Columns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	note := withDashboard("in-process server on 127.0.0.1:8421 (stops when you quit)", "http://127.0.0.1:8421", testSession)
	m := newModel(ctx, &fakeAPI{turn: "turn_1"}, newFeed(), options{sessionID: testSession, workspace: "/ws", note: note})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	got := ansi.Strip(m.statusView())
	if !strings.HasPrefix(got, keyHints) || ansi.StringWidth(got) > 120 {
		t.Fatalf("status line %q: the keys are cut or it overflows", got)
	}
}
