package tui

import "charm.land/lipgloss/v2"

// styles used by the renderer. Colours are ANSI-16 indexes so they follow
// the terminal's palette on dark and light backgrounds alike.
type styles struct {
	user      lipgloss.Style
	userMark  lipgloss.Style
	faint     lipgloss.Style
	thinking  lipgloss.Style
	tool      lipgloss.Style
	ok        lipgloss.Style
	err       lipgloss.Style
	warn      lipgloss.Style
	struck    lipgloss.Style
	cancelled lipgloss.Style
	worker    lipgloss.Style
	card      lipgloss.Style
	header    lipgloss.Style
	activity  lipgloss.Style
	status    lipgloss.Style
	inspector lipgloss.Style
	evType    lipgloss.Style
	diffFile  lipgloss.Style
	diffHunk  lipgloss.Style
	diffAdd   lipgloss.Style
	diffDel   lipgloss.Style
	prompt    lipgloss.Style // the approval prompt's card
	key       lipgloss.Style // a key in the help and the hints
	overlay   lipgloss.Style // the help and the session picker
	selected  lipgloss.Style // the picker's current row
	queued    lipgloss.Style // the queue panel above the input
}

func newStyles() styles {
	return styles{
		user:      lipgloss.NewStyle().Bold(true),
		userMark:  lipgloss.NewStyle().Foreground(lipgloss.Color("4")).Bold(true),
		faint:     lipgloss.NewStyle().Faint(true),
		thinking:  lipgloss.NewStyle().Faint(true).Italic(true),
		tool:      lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		ok:        lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		err:       lipgloss.NewStyle().Foreground(lipgloss.Color("1")),
		warn:      lipgloss.NewStyle().Foreground(lipgloss.Color("3")),
		struck:    lipgloss.NewStyle().Strikethrough(true).Faint(true),
		cancelled: lipgloss.NewStyle().Foreground(lipgloss.Color("3")).Italic(true),
		worker:    lipgloss.NewStyle().Foreground(lipgloss.Color("5")),
		card:      lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("5")).Padding(0, 1),
		header:    lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("4")),
		activity:  lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		status:    lipgloss.NewStyle().Faint(true),
		inspector: lipgloss.NewStyle().Border(lipgloss.NormalBorder(), true, false, false, false).BorderForeground(lipgloss.Color("8")),
		evType:    lipgloss.NewStyle().Foreground(lipgloss.Color("5")),
		diffFile:  lipgloss.NewStyle().Bold(true),
		diffHunk:  lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		diffAdd:   lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		diffDel:   lipgloss.NewStyle().Foreground(lipgloss.Color("1")),
		prompt:    lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("3")).Padding(0, 1),
		key:       lipgloss.NewStyle().Bold(true),
		overlay:   lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("4")).Padding(0, 1),
		selected:  lipgloss.NewStyle().Reverse(true),
		queued:    lipgloss.NewStyle().Foreground(lipgloss.Color("5")),
	}
}
