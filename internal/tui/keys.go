package tui

import (
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
)

// quitWindow is how long "press ctrl-c again to quit" stays armed.
const quitWindow = 3 * time.Second

// key handles a key press. The composer gets every key the chat screen
// does not claim.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	if s != "ctrl+c" {
		m.quitArmed, m.flash = false, "" // any other key dismisses a notice
	}
	switch s {
	case "ctrl+c":
		return m.ctrlC()
	case "enter":
		return m.send()
	case "f2", "ctrl+e":
		m.inspector = !m.inspector
		m.layout()
		return nil
	case "ctrl+o", "tab":
		m.expanded = !m.expanded
		m.dirty = true
		m.render()
		return nil
	case "esc":
		if m.inspector {
			m.inspector = false
			m.layout()
		}
		m.flash = ""
		return nil
	case "pgup":
		m.vp.PageUp()
		return m.loadOlder()
	case "pgdown":
		m.vp.PageDown()
		return nil
	case "ctrl+up", "shift+up":
		m.vp.ScrollUp(1)
		return m.loadOlder()
	case "ctrl+down", "shift+down":
		m.vp.ScrollDown(1)
		return nil
	}
	var cmd tea.Cmd
	m.composer, cmd = m.composer.Update(k)
	return cmd
}

// ctrlC cancels the turn in flight; when idle, the first press arms quit
// and the second quits. While a cancel is already on its way, a further
// press arms quit too, so a stuck turn never traps the user.
func (m *Model) ctrlC() tea.Cmd {
	if m.quitArmed {
		return tea.Quit
	}
	if !m.cancelling {
		if m.currentTurn() != "" {
			return m.cancel()
		}
		if m.submitting {
			m.cancelAfter, m.cancelling = true, true
			m.setFlash("cancelling as soon as the turn starts…", false)
			return nil
		}
	}
	m.quitArmed = true
	m.quitSeq++
	m.setFlash("press ctrl-c again to quit", false)
	seq := m.quitSeq
	return tea.Tick(quitWindow, func(time.Time) tea.Msg { return disarmQuitMsg{seq} })
}

// cancel asks the server to cancel the current turn.
func (m *Model) cancel() tea.Cmd {
	turn := m.currentTurn()
	if turn == "" {
		return nil
	}
	m.cancelling = true
	ctx, api, sid := m.ctx, m.api, m.sessionID
	return func() tea.Msg {
		return cancelSentMsg{err: api.Cancel(ctx, sid, turn, "user_cancel")}
	}
}

// send submits the composer's text as a new turn.
func (m *Model) send() tea.Cmd {
	text := strings.TrimSpace(m.composer.Value())
	switch {
	case text == "":
		return nil
	case m.submitting || m.currentTurn() != "":
		m.setFlash("a turn is running: wait for it, or ctrl-c to cancel it", true)
		return nil
	case m.followErr != nil:
		m.setFlash("not connected to the session", true)
		return nil
	}
	m.composer.Reset()
	m.vp.GotoBottom()
	m.submitting = true
	m.flash = ""
	ctx, api, sid := m.ctx, m.api, m.sessionID
	return func() tea.Msg {
		turn, err := api.Submit(ctx, sid, text)
		return submittedMsg{turn: turn, err: err}
	}
}
