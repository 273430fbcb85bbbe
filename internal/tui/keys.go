package tui

import (
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
	switch m.overlay {
	case overlayHelp:
		switch s {
		case "ctrl+c":
			m.overlay = overlayNone
			return m.ctrlC()
		case "esc", "?", "f1", "q", "enter", "space":
			m.overlay = overlayNone
			return nil
		case "up", "k", "pgup":
			m.helpTop = max(m.helpTop-1, 0)
			return nil
		case "down", "j", "pgdown":
			m.helpTop++ // helpView bounds it
			return nil
		}
		m.overlay = overlayNone // any other key closes it and does its work
	case overlayPicker:
		return m.pickerKey(k)
	case overlayModels:
		return m.modelsKey(k)
	case overlaySheet:
		return m.sheetKey(k)
	case overlayRewind:
		return m.rewindKey(k)
	}
	if cmd, ok := m.approvalKey(k); ok {
		return cmd
	}
	switch s {
	case "ctrl+c":
		return m.ctrlC()
	case "enter":
		return m.send(false)
	case "ctrl+s":
		return m.send(true)
	case "f1":
		m.overlay = overlayHelp
		return nil
	case "?":
		if m.composer.Value() == "" {
			m.overlay = overlayHelp
			return nil
		}
	case "shift+tab":
		return m.setMode(m.nextMode())
	case "f2", "ctrl+e":
		m.keepLiveEnd(func() {
			m.inspector = !m.inspector
			m.layout()
		})
		return nil
	case "ctrl+o", "tab":
		m.expanded = !m.expanded
		m.dirty = true
		m.render()
		return nil
	case "esc":
		switch {
		case m.inspector:
			m.keepLiveEnd(func() {
				m.inspector = false
				m.layout()
			})
		case m.currentTurn() != "" && !m.cancelling:
			return m.cancel()
		case m.submitting && !m.cancelling:
			m.cancelAfter, m.cancelling = true, true
			m.setFlash("cancelling as soon as the turn starts…", false)
		}
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
	case "ctrl+end":
		m.vp.GotoBottom()
		return nil
	}
	var cmd tea.Cmd
	m.composer, cmd = m.composer.Update(k)
	return cmd
}

// keepLiveEnd runs a layout change, keeping the view at the live end if
// it was there (a viewport that shrinks or grows keeps its top line
// otherwise, and the newest lines drop out of sight).
func (m *Model) keepLiveEnd(change func()) {
	atBottom := m.vp.AtBottom()
	change()
	if atBottom {
		m.vp.GotoBottom()
	}
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
