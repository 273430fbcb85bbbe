package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// sheet is a box of lines over the conversation: the background
// commands (/bg), the MCP servers (/mcp), or a question (the /undo
// confirmation), whose y runs confirm.
type sheet struct {
	kind    string // "bg", "mcp", "undo"
	title   string
	hint    string
	lines   []string // for a question; the live sheets draw theirs
	top     int      // the first line shown, on a short terminal
	confirm func() tea.Cmd
}

// openSheet shows a sheet.
func (m *Model) openSheet(s sheet) {
	m.sheet = s
	m.overlay = overlaySheet
}

// sheetKey handles a key while a sheet is open: ↑↓ scroll; a question
// takes y or enter (yes) and n or esc (no); other sheets close on esc,
// q or enter.
func (m *Model) sheetKey(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	switch s {
	case "up", "k", "pgup":
		m.sheet.top = max(m.sheet.top-1, 0)
		return nil
	case "down", "j", "pgdown":
		m.sheet.top++ // sheetView bounds it
		return nil
	}
	if m.sheet.confirm != nil {
		switch s {
		case "y", "enter":
			m.overlay = overlayNone
			return m.sheet.confirm()
		case "n", "esc", "q", "ctrl+c":
			m.overlay = overlayNone
			m.setFlash("nothing was changed", false)
		}
		return nil
	}
	switch s {
	case "esc", "q", "enter", "ctrl+c":
		m.overlay = overlayNone
	}
	return nil
}

// sheetView draws the open sheet in a box of width × height.
func (m *Model) sheetView(width, height int) string {
	st := m.st
	inner := max(width-4, 20)
	body := m.sheet.lines
	switch m.sheet.kind {
	case "bg":
		body = m.bgLines()
	case "mcp":
		body = m.mcpLines()
	}
	var wrapped []string
	for _, l := range body {
		wrapped = append(wrapped, strings.Split(wrap(l, inner), "\n")...)
	}
	lines := []string{st.header.Render(m.sheet.title) + st.faint.Render("  "+m.sheet.hint)}
	lines = append(lines, wrapped...)
	if room := max(height-2, 2); len(lines) > room {
		m.sheet.top = min(m.sheet.top, len(lines)-room+1)
		lines = append(append([]string{lines[0]}, lines[1+m.sheet.top:m.sheet.top+room-1]...),
			st.warn.Render(fmt.Sprintf("↑↓ more (%d lines)", len(wrapped))))
	}
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, inner, "…")
	}
	return st.overlay.Width(width).Render(strings.Join(lines, "\n"))
}
