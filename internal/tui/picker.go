package tui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/cli"
)

// picker is the session picker (/sessions): the server's top-level
// sessions, this workspace's first, then by last activity.
type picker struct {
	loading  bool
	err      error
	sessions []client.Session
	cursor   int
}

// sessionsMsg is the answer of Sessions.
type sessionsMsg struct {
	list []client.Session
	err  error
}

// openPicker shows the picker and loads the sessions.
func (m *Model) openPicker() tea.Cmd {
	m.overlay = overlayPicker
	m.picker = picker{loading: true}
	ctx, api := m.ctx, m.api
	return func() tea.Msg {
		list, err := api.Sessions(ctx)
		return sessionsMsg{list: list, err: err}
	}
}

// loaded fills the picker, its cursor on the current session.
func (m *Model) loaded(msg sessionsMsg) {
	m.picker.loading, m.picker.err = false, msg.err
	m.picker.sessions = PickOrder(msg.list, m.workspace)
	m.picker.cursor = 0
	for i, s := range m.picker.sessions {
		if s.ID == m.sessionID {
			m.picker.cursor = i
		}
	}
}

// PickOrder is the order sessions are offered in to resume: workers
// left out, the sessions of workspace first, each group by last
// activity, newest first.
func PickOrder(list []client.Session, workspace string) []client.Session {
	var out []client.Session
	for _, s := range list {
		if s.ParentSessionID == nil {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b client.Session) int {
		aw, bw := a.WorkspacePath == workspace, b.WorkspacePath == workspace
		if aw != bw {
			if aw {
				return -1
			}
			return 1
		}
		return lastActive(b).Compare(lastActive(a))
	})
	return out
}

// lastActive is a session's last activity (its creation before any).
func lastActive(s client.Session) time.Time {
	if s.LastActivityAt.IsZero() {
		return s.CreatedAt
	}
	return s.LastActivityAt
}

// pickerKey handles a key while the picker is open.
func (m *Model) pickerKey(k tea.KeyPressMsg) tea.Cmd {
	n := len(m.picker.sessions)
	switch k.String() {
	case "esc", "q", "ctrl+c":
		m.overlay = overlayNone
	case "up", "k", "shift+tab":
		if n > 0 {
			m.picker.cursor = (m.picker.cursor - 1 + n) % n
		}
	case "down", "j", "tab":
		if n > 0 {
			m.picker.cursor = (m.picker.cursor + 1) % n
		}
	case "n":
		m.overlay = overlayNone
		return m.newSession()
	case "enter":
		if n > 0 {
			return m.switchTo(m.picker.sessions[m.picker.cursor].ID)
		}
		m.overlay = overlayNone
	}
	return nil
}

// pickerView draws the picker in a box of width × height.
func (m *Model) pickerView(width, height int) string {
	st := m.st
	inner := max(width-4, 20)
	lines := []string{st.header.Render("sessions") + st.faint.Render("  ↑↓ choose · enter open · n new · esc close")}
	switch {
	case m.picker.loading:
		lines = append(lines, st.faint.Render("loading…"))
	case m.picker.err != nil:
		lines = append(lines, st.err.Render("could not list the sessions: "+errText(m.picker.err)))
	case len(m.picker.sessions) == 0:
		lines = append(lines, st.faint.Render("no sessions"))
	}
	rows := max(height-3, 1)
	first := 0
	if m.picker.cursor >= rows {
		first = m.picker.cursor - rows + 1
	}
	now := time.Now()
	for i := first; i < len(m.picker.sessions) && i < first+rows; i++ {
		s := m.picker.sessions[i]
		title := s.Title
		if title == "" {
			title = "(no messages yet)"
		}
		mark := "  "
		if s.ID == m.sessionID {
			mark = "● "
		}
		where := ""
		if s.WorkspacePath != m.workspace {
			where = " · " + s.WorkspacePath
		}
		turns := fmt.Sprintf("%d turns", s.TurnCount)
		if s.TurnCount == 1 {
			turns = "1 turn"
		}
		line := fmt.Sprintf("%s%s — %s · %s · %s%s", mark, oneLine(title), cli.Ago(now, lastActive(s)), turns, s.ID, where)
		line = ansi.Truncate(line, inner, "…")
		if i == m.picker.cursor {
			line = st.selected.Render(line + strings.Repeat(" ", max(inner-ansi.StringWidth(line), 0)))
		}
		lines = append(lines, line)
	}
	return st.overlay.Width(width).Render(strings.Join(lines, "\n"))
}
