package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// Rows of the fixed parts of the screen.
const (
	composerHeight = 3
	headerRows     = 1
	activityRows   = 1
	statusRows     = 1
)

// layout sizes the viewport, the inspector and the composer.
func (m *Model) layout() {
	if m.width <= 0 || m.height <= 0 {
		return
	}
	m.composer.SetWidth(m.width)
	vh := m.height - headerRows - activityRows - composerHeight - statusRows - m.inspectorHeight() - m.panelRows
	m.vp.SetWidth(m.width)
	m.vp.SetHeight(max(vh, 1))
}

// inspectorHeight is the inspector's share of the screen (0 when closed).
func (m *Model) inspectorHeight() int {
	if !m.inspector {
		return 0
	}
	return min(max(m.height/3, 4), 16)
}

// View composes the screen: header, conversation, inspector, activity
// bar, composer, status line. The conversation itself is rendered on
// frames, not here.
func (m *Model) View() tea.View {
	if m.width <= 0 {
		v := tea.NewView("metis: starting…")
		v.AltScreen = true
		return v
	}
	parts := []string{m.headerView(), m.mainView()}
	if m.inspector {
		parts = append(parts, m.inspectorView(m.inspectorHeight()))
	}
	parts = append(parts, m.activityView())
	if m.panelRows > 0 {
		parts = append(parts, m.panelView())
	}
	top := strings.Join(parts, "\n")
	row := strings.Count(top, "\n") + 1
	v := tea.NewView(top + "\n" + m.composer.View() + "\n" + m.statusView())
	v.AltScreen = true
	v.WindowTitle = "metis " + m.sessionID
	if m.pending() != nil {
		v.WindowTitle = "⏸ " + v.WindowTitle + " — waiting for you"
	}
	if c := m.composer.Cursor(); c != nil {
		c.Y += row
		v.Cursor = c
	}
	return v
}

// mainView is the conversation, or the overlay over it.
func (m *Model) mainView() string {
	h := m.vp.Height()
	var box string
	switch m.overlay {
	case overlayHelp:
		box = m.helpView(m.width, h)
	case overlayPicker:
		box = m.pickerView(m.width, h)
	case overlayModels:
		box = m.modelsView(m.width, h)
	case overlaySheet:
		box = m.sheetView(m.width, h)
	case overlayRewind:
		box = m.rewindView(m.width, h)
	default:
		return m.vp.View()
	}
	lines := strings.Split(box, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// headerView is "metis · title · session id · workspace", the title
// followed by "(archived)" while the session is archived.
func (m *Model) headerView() string {
	h := "metis"
	if m.title != "" {
		h += " · " + oneLine(m.title)
	}
	if m.archived {
		h += " (archived)"
	}
	if m.sessionID != "" {
		h += " · " + m.sessionID
	}
	if m.workspace != "" {
		h += " · " + m.workspace
	}
	return m.st.header.Render(ansi.Truncate(h, m.width, "…"))
}

// activityView is the one-line state of the stream and the turn:
// "reconnecting…", or the model, what it is doing, tokens so far and the
// session's cost.
func (m *Model) activityView() string {
	st := m.st
	var s string
	switch {
	case m.reconnecting:
		s = st.warn.Render(spinner(m.spin) + " reconnecting…")
		if m.attempt > 1 {
			s += st.faint.Render(fmt.Sprintf(" (attempt %d)", m.attempt))
		}
		if m.connErr != nil {
			s += st.faint.Render(": " + cause(m.connErr))
		}
	case m.followErr != nil:
		s = st.err.Render("✗ disconnected: " + m.followErr.Error())
	case !m.subscribed:
		s = st.faint.Render("connecting…")
	case m.approval.reasonFor != "":
		s = st.warn.Render("⏸ denying: type why below (optional, the model is told) — enter denies · esc goes back")
	case m.pending() != nil:
		p := m.pending()
		s = st.warn.Render("⏸ waiting for you: " + p.ToolName + " " + oneLine(approvalTarget(p)) + " — y allow · a allow for the session · n deny")
	case m.compacting:
		s = st.activity.Render(spinner(m.spin) + " compacting the conversation…")
	case m.currentTurn() != "" || m.submitting:
		parts := []string{spinner(m.spin) + " " + m.model(), m.doing()}
		if n := m.turnTokens(); n > 0 {
			parts = append(parts, fmt.Sprintf("↓ %d tok", n))
		}
		parts = append(parts, fmt.Sprintf("$%.4f", m.view.CostUSD))
		if g := m.gauge(); g != "" {
			parts = append(parts, g)
		}
		if n := m.bgRunning(); n > 0 {
			parts = append(parts, fmt.Sprintf("bg %d running", n))
		}
		if m.cancelling {
			parts = append(parts, "cancelling…")
		}
		s = st.activity.Render(strings.Join(parts, " · "))
	default:
		parts := []string{"idle", m.model(), "mode " + m.mode()}
		if n := m.bgRunning(); n > 0 {
			parts = append(parts, fmt.Sprintf("bg %d running (/bg)", n))
		}
		parts = append(parts, fmt.Sprintf("$%.4f", m.view.CostUSD))
		if g := m.gauge(); g != "" {
			if m.gaugeFull() {
				g = st.warn.Render(g + " (/compact frees it)")
			}
			parts = append(parts, g)
		}
		switch t := m.view.Turn; t.Status {
		case "failed":
			parts = append(parts, st.err.Render("last turn failed: "+t.Reason))
		case "cancelled":
			parts = append(parts, "last turn cancelled")
		}
		s = st.faint.Render(strings.Join(parts, " · "))
	}
	return ansi.Truncate(s, m.width, "…")
}

// model is the model the next turn asks for (/model), else the model of
// the latest call, else the session's.
func (m *Model) model() string {
	if m.modelPin != "" {
		return m.modelPin
	}
	if m.modelName != "" {
		return m.modelName
	}
	if s := m.sessionModel(); s != "" {
		return s
	}
	return "model"
}

// doing says what the turn is doing: the streaming block's kind, the
// running tool, or waiting.
func (m *Model) doing() string {
	if m.submitting {
		return "sending"
	}
	turn := m.currentTurn()
	for i := len(m.view.Messages) - 1; i >= 0; i-- {
		msg := m.view.Messages[i]
		if msg.TurnID != turn || msg.Status != "streaming" || len(msg.Blocks) == 0 {
			continue
		}
		switch b := msg.Blocks[len(msg.Blocks)-1]; b.Type {
		case "thinking":
			return "thinking"
		case "tool_use":
			return "calling " + b.Name
		default:
			return "writing"
		}
	}
	var running []string
	for _, tc := range m.view.Tools {
		if tc.Status == "running" {
			running = append(running, tc.Name)
		}
	}
	if len(running) > 0 {
		return "running " + strings.Join(running, ", ")
	}
	return "waiting for the model"
}

// turnTokens is the current turn's output tokens: the usage of its
// completed calls plus one per delta of the message still streaming.
func (m *Model) turnTokens() int64 {
	turn := m.currentTurn()
	var n int64
	for _, msg := range m.view.Messages {
		if msg.TurnID != turn || msg.Role != "assistant" {
			continue
		}
		if msg.Usage != nil {
			n += msg.Usage.OutputTokens
		} else {
			n += int64(m.deltas[msg.ID])
		}
	}
	return n
}

// statusView is the bottom line: a transient message, or the keys.
func (m *Model) statusView() string {
	var s string
	switch {
	case m.flash != "" && m.flashIsError:
		s = m.st.err.Render(m.flash)
	case m.flash != "":
		s = m.st.warn.Render(m.flash)
	case m.pending() != nil && m.approval.reasonFor == "":
		s = m.st.warn.Render("⏸ the session waits for you: y allow once · a allow for the session · n deny · esc cancel the turn")
	default:
		// The keys first: a narrow terminal cuts the note, never them.
		help := keyHints
		if m.note != "" {
			help += " · " + m.note
		}
		s = m.st.status.Render(help)
		if mark := m.mcpMark(); mark != "" {
			// A server down matters more than the last hints.
			s = m.st.warn.Render(mark) + m.st.status.Render(" · ") + s
		}
	}
	return ansi.Truncate(s, m.width, "…")
}

func textareaStyles(dark bool) textarea.Styles { return textarea.DefaultStyles(dark) }

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func spinner(i int) string { return spinnerFrames[i%len(spinnerFrames)] }

// cause is the innermost part of a wrapped error's text ("connection
// refused" rather than the whole request).
func cause(err error) string {
	s := oneLine(err.Error())
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		return s[i+2:]
	}
	return s
}
