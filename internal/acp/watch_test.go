package acp

import (
	"context"
	"slices"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/servertest"
)

// Changes made elsewhere: renameElsewhere and modeElsewhere change the
// session through the HTTP API, as the TUI or the dashboard does. They
// report a failure with Errorf, so that an editor's callback may call
// them.

func renameElsewhere(t *testing.T, h *servertest.Harness, sid, title string) {
	t.Helper()
	if st := h.Do("PATCH", "/sessions/"+sid, map[string]string{"title": title}, nil); st != 200 {
		t.Errorf("PATCH title: %d", st)
	}
}

func modeElsewhere(t *testing.T, h *servertest.Harness, sid, mode string) {
	t.Helper()
	if st := h.Do("PATCH", "/sessions/"+sid, map[string]string{"mode": mode}, nil); st != 200 {
		t.Errorf("PATCH mode: %d", st)
	}
}

// titles are the titles of the session_info_updates among us.
func titles(us []sdk.SessionUpdate) []string {
	var out []string
	for _, u := range us {
		if u.SessionInfoUpdate != nil && u.SessionInfoUpdate.Title != nil {
			out = append(out, *u.SessionInfoUpdate.Title)
		}
	}
	return out
}

func countTitle(us []sdk.SessionUpdate, title string) int {
	return count(us, func(u sdk.SessionUpdate) bool {
		return u.SessionInfoUpdate != nil && u.SessionInfoUpdate.Title != nil && *u.SessionInfoUpdate.Title == title
	})
}

func countModeUpdates(us []sdk.SessionUpdate, mode string) int {
	return count(us, func(u sdk.SessionUpdate) bool {
		return u.CurrentModeUpdate != nil && string(u.CurrentModeUpdate.CurrentModeId) == mode
	})
}

func countModeOptions(us []sdk.SessionUpdate, mode string) int {
	return count(us, func(u sdk.SessionUpdate) bool {
		if u.ConfigOptionUpdate == nil {
			return false
		}
		o := selectOption(u.ConfigOptionUpdate.ConfigOptions, configMode)
		return o != nil && string(o.CurrentValue) == mode
	})
}

// ofSession returns the updates so far of one session.
func (e *editor) ofSession(sid string) []sdk.SessionUpdate {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []sdk.SessionUpdate
	for _, n := range e.updates {
		if string(n.SessionId) == sid {
			out = append(out, n.Update)
		}
	}
	return out
}

// fence renames the session to title and waits for its
// session_info_update: the session's standing follower maps its events
// in order, so everything changed before has been sent by then.
func fence(t *testing.T, h *servertest.Harness, s *session, sid, title string) {
	t.Helper()
	renameElsewhere(t, h, sid, title)
	s.ed.waitFor(t, "the fence's session_info_update", func(us []sdk.SessionUpdate) bool {
		return slices.Contains(titles(us), title)
	})
}

// openAs serves an agent and opens a session in it as how says:
// session/new, or session/load or session/resume of a session made
// through the HTTP API.
func openAs(t *testing.T, h *servertest.Harness, how string) (*session, string) {
	t.Helper()
	if how == "new" {
		return openSession(t, h)
	}
	sid := h.CreateSession()
	return reopen(t, h, how, sid), sid
}

// reopen serves an agent and opens session sid in it with session/load
// or session/resume, as how says.
func reopen(t *testing.T, h *servertest.Harness, how, sid string) *session {
	t.Helper()
	s := serveAgent(t, h.URL)
	s.initialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var err error
	if how == "load" {
		_, err = s.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace, McpServers: []sdk.McpServer{}})
	} else {
		_, err = s.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace})
	}
	if err != nil {
		t.Fatalf("session/%s: %v", how, err)
	}
	return s
}

// A rename made elsewhere between prompts reaches the editor as
// session_info_update with the new title, once, however the editor
// opened the session.
func TestRenameBetweenPromptsIsSessionInfoUpdate(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	for _, how := range []string{"new", "load", "resume"} {
		t.Run(how, func(t *testing.T) {
			s, sid := openAs(t, h, how)
			mustPrompt(t, s, sid, "/echo before the rename")
			title := "renamed between prompts (" + how + ")"
			renameElsewhere(t, h, sid, title)
			s.ed.waitFor(t, "session_info_update", func(us []sdk.SessionUpdate) bool { return countTitle(us, title) > 0 })
			fence(t, h, s, sid, "fence")
			if n := countTitle(s.ed.all(), title); n != 1 {
				t.Errorf("%d session_info_update(%q); titles %q", n, title, titles(s.ed.all()))
			}
		})
	}
}

// A session renamed before the editor opened it is named in the editor:
// session/load and session/resume send its title as
// session_info_update, once, though no rename happens while it is open.
func TestTitleGivenBeforeOpeningIsSessionInfoUpdate(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	for _, how := range []string{"load", "resume"} {
		t.Run(how, func(t *testing.T) {
			sid := h.CreateSession()
			title := "named before the editor (" + how + ")"
			renameElsewhere(t, h, sid, title)
			s := reopen(t, h, how, sid)
			s.ed.waitFor(t, "session_info_update", func(us []sdk.SessionUpdate) bool { return countTitle(us, title) > 0 })
			fence(t, h, s, sid, "fence")
			if n := countTitle(s.ed.all(), title); n != 1 {
				t.Errorf("%d session_info_update(%q); titles %q", n, title, titles(s.ed.all()))
			}
		})
	}
}

// A mode change made elsewhere between prompts reaches the editor as
// current_mode_update and config_option_update with the new mode, each
// once.
func TestModeChangeBetweenPromptsIsCurrentModeUpdate(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s, sid := openSession(t, h)
	mustPrompt(t, s, sid, "/echo before the change")
	modeElsewhere(t, h, sid, "plan")
	s.ed.waitFor(t, "current_mode_update(plan) and config_option_update(plan)", func(us []sdk.SessionUpdate) bool {
		return countModeUpdates(us, "plan") > 0 && countModeOptions(us, "plan") > 0
	})
	fence(t, h, s, sid, "fence")
	us := s.ed.all()
	if n, m := countModeUpdates(us, "plan"), countModeOptions(us, "plan"); n != 1 || m != 1 {
		t.Errorf("%d current_mode_update(plan), %d config_option_update(plan); updates %s", n, m, describe(us))
	}
	// The next prompt runs in the new mode, and still answers.
	if r := mustPrompt(t, s, sid, "/echo after"); r.StopReason != sdk.StopReasonEndTurn {
		t.Errorf("stop reason %q", r.StopReason)
	}
}

// While a prompt's turn runs (here: while the editor is asked for a
// permission), a rename and a mode change made elsewhere are each sent
// once: the turn's follower leaves them to the session's.
func TestSessionUpdatesDuringAPromptAreSentOnce(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	s, sid := openSession(t, h)
	s.ed.allowingAfter(func() {
		renameElsewhere(t, h, sid, "renamed mid-prompt")
		modeElsewhere(t, h, sid, "accept_edits") // shell calls still ask
	})
	if r := mustPrompt(t, s, sid, shellPrompt("echo once")); r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %q", r.StopReason)
	}
	fence(t, h, s, sid, "fence")
	us := s.ed.all()
	if n := countTitle(us, "renamed mid-prompt"); n != 1 {
		t.Errorf("%d session_info_update(renamed mid-prompt); titles %q", n, titles(us))
	}
	if n, m := countModeUpdates(us, "accept_edits"), countModeOptions(us, "accept_edits"); n != 1 || m != 1 {
		t.Errorf("%d current_mode_update(accept_edits), %d config_option_update(accept_edits); updates %s", n, m, describe(us))
	}
}

// session/close stops the session's standing follower: its
// subscription ends, and a rename or a mode change made after is not
// sent; another session of the agent is still followed. The end of the
// connection stops the rest (and leakCheck finds no goroutine left).
func TestCloseSessionStopsItsFollower(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s, sid := openSession(t, h)
	other := s.newSession(t, h.Workspace)
	renameElsewhere(t, h, sid, "before the close")
	s.ed.waitFor(t, "session_info_update and the commands before the close", func([]sdk.SessionUpdate) bool {
		us := s.ed.ofSession(sid)
		return countTitle(us, "before the close") == 1 && count(us, func(u sdk.SessionUpdate) bool { return u.AvailableCommandsUpdate != nil }) == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.conn.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: sdk.SessionId(sid)}); err != nil {
		t.Fatal(err)
	}
	sent := len(s.ed.ofSession(sid))
	servertest.WaitFor(t, "the closed session's subscription to end", func() bool { return h.Server.Hub.Clients(sid) == 0 })
	renameElsewhere(t, h, sid, "after the close")
	modeElsewhere(t, h, sid, "plan")
	fence(t, h, s, other, "the other session")
	if us := s.ed.ofSession(sid); len(us) != sent {
		t.Errorf("%d updates of the closed session after session/close: %s", len(us)-sent, describe(us[sent:]))
	}
	if n := h.Server.Hub.Clients(other); n != 1 {
		t.Errorf("%d clients of the open session, want its follower", n)
	}
	s.close(t)
	servertest.WaitFor(t, "the open session's subscription to end with the connection", func() bool { return h.Server.Hub.Clients(other) == 0 })
}

// An open session's follower is an ordinary subscription: the trace
// gets its bus.subscriber_registered and, at session/close,
// bus.subscriber_unregistered, nothing else, and the session's last
// activity does not move.
func TestFollowingASessionIsNotActivity(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	before := summary(t, h, sid).LastActivityAt
	s := reopen(t, h, "resume", sid)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.conn.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: sdk.SessionId(sid)}); err != nil {
		t.Fatal(err)
	}
	var types []string
	servertest.WaitFor(t, "bus.subscriber_unregistered", func() bool {
		types = types[:0]
		for _, ev := range h.Live.Events(sid) {
			types = append(types, string(ev.Type))
		}
		return slices.Contains(types, "bus.subscriber_unregistered")
	})
	if want := []string{"session.created", "bus.subscriber_registered", "bus.subscriber_unregistered"}; !slices.Equal(types, want) {
		t.Errorf("trace %q, want %q", types, want)
	}
	if after := summary(t, h, sid).LastActivityAt; !after.Equal(before) {
		t.Errorf("last activity moved from %v to %v", before, after)
	}
}
