package tui

import (
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// overlay is what covers the conversation, if anything.
type overlay int

const (
	overlayNone overlay = iota
	overlayHelp
	overlayPicker
	overlayModels // the model picker (/model)
	overlaySheet  // a sheet: /bg, /mcp, the /undo confirmation
	overlayRewind // the prompts /rewind goes back to
)

// composerPlaceholder is the composer's hint when empty.
const composerPlaceholder = "Message metis — enter sends · ? or F1 help · /help commands"

// busyPlaceholder is the composer's hint while a turn runs.
const busyPlaceholder = "A follow-up — enter queues it after this turn · ctrl+s steers it into this turn"

// keyHints is the status line's standing hint: the keys a newcomer needs
// first, before anything else so a narrow terminal cuts the rest.
const keyHints = "? help · enter send · esc cancel · ctrl+c quit · tab expand · F2 events"

// helpKeys are the keys the help overlay lists.
var helpKeys = [][2]string{
	{"enter", "send the message; while a turn runs, queue it to run next"},
	{"ctrl+s", "steer: send the message into the running turn (its next model call)"},
	{"alt+enter, shift+enter, ctrl+j", "new line in the message"},
	{"esc", "cancel the running turn (queued messages still run) or close what is open"},
	{"ctrl+c", "cancel the running turn; when idle, twice to quit"},
	{"tab, ctrl+o", "expand thinking, tool output, diffs and worker cards"},
	{"shift+tab", "next permission mode (default → accept_edits → plan → auto)"},
	{"F2, ctrl+e", "the raw event inspector"},
	{"pgup, pgdn, shift+↑↓", "scroll (pgup at the top loads older messages)"},
	{"ctrl+end", "back to the live end"},
	{"? (empty input), F1", "this help"},
	{"y / a / n", "answer an approval prompt: allow once, allow for the session, deny"},
}

// helpCommands are the slash commands the TUI handles itself (never sent
// to the model). Others ("/echo", "/model" prefixes of the demo model…)
// go to the model as typed.
var helpCommands = [][2]string{
	{"/help", "this help"},
	{"/new", "start a new session in this workspace"},
	{"/sessions", "pick a session to switch to (this workspace's first)"},
	{"/model [provider:model]", "pick a model the server offers, or run the following turns on one"},
	{"/mode [default|accept_edits|plan|auto]", "show or change the permission mode"},
	{"/compact [what to keep]", "summarise the conversation now to free context"},
	{"/unqueue [N]", "take queued message N (default the last) out of the queue"},
	{"/image PATH", "attach an image to the next message (/image clear drops them)"},
	{"/undo", "put the files back as before the last turn that changed them (asks first)"},
	{"/redo", "undo that revert"},
	{"/fork", "copy this session as it is and switch to the copy"},
	{"/rewind", "edit an earlier prompt, in a copy"},
	{"/bg", "the background commands, running and ended"},
	{"/mcp", "the MCP servers and their state"},
	{"/quit", "leave (the session stays; metis --continue resumes it)"},
}

// helpView is the help overlay for a box of width × height.
func (m *Model) helpView(width, height int) string {
	st := m.st
	inner := max(width-4, 20)
	col := 0
	for _, kv := range append(append([][2]string{}, helpKeys...), helpCommands...) {
		col = max(col, lipgloss.Width(kv[0]))
	}
	col = min(col+2, inner/2)
	row := func(k, v string) string {
		k = ansi.Truncate(k, col-1, "…")
		return st.key.Render(k) + strings.Repeat(" ", col-lipgloss.Width(k)) + ansi.Truncate(v, inner-col, "…")
	}
	lines := []string{st.header.Render("metis — help") + st.faint.Render("  (esc, ? or F1 closes)"), "", st.faint.Render("keys")}
	for _, kv := range helpKeys {
		lines = append(lines, row(kv[0], kv[1]))
	}
	lines = append(lines, "", st.faint.Render("commands (handled here, never sent to the model)"))
	for _, kv := range helpCommands {
		lines = append(lines, row(kv[0], kv[1]))
	}
	lines = append(lines, "", st.faint.Render("session"))
	lines = append(lines, ansi.Truncate("id "+m.sessionID, inner, "…"))
	if m.workspace != "" {
		lines = append(lines, ansi.Truncate("workspace "+m.workspace+" (the directory metis started in)", inner, "…"))
	}
	if m.note != "" {
		for _, n := range strings.Split(m.note, " · ") {
			lines = append(lines, ansi.Truncate(n, inner, "…"))
		}
	}
	if strings.HasPrefix(m.model(), "builtin:") {
		lines = append(lines, "", st.faint.Render("no provider key: the offline demo model answers. Try /echo hi, /long 20,"),
			st.faint.Render(`/tool list_dir {"path": "."}; set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real model.`))
	}
	if room := max(height-2, 1); len(lines) > room {
		// Too short a terminal: ↑↓ scroll the help; the last line says so.
		m.helpTop = min(m.helpTop, len(lines)-room+1)
		lines = append(lines[m.helpTop:m.helpTop+room-1], st.warn.Render(fmt.Sprintf("↑↓ more (%d of %d lines shown)", room-1, len(lines))))
	} else {
		m.helpTop = 0
	}
	return st.overlay.Width(width).Render(strings.Join(lines, "\n"))
}
