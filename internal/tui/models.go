package tui

import (
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
)

// modelPicker is the model picker (/model): the models the server's
// GET /models offers, and the providers it cannot use with the reason.
type modelPicker struct {
	loading bool
	err     error
	list    client.ModelList
	cursor  int
}

// modelsMsg is the answer of Models.
type modelsMsg struct {
	list client.ModelList
	err  error
}

// openModels shows the model picker and asks the server for its models.
func (m *Model) openModels() tea.Cmd {
	m.overlay = overlayModels
	m.models = modelPicker{loading: true}
	ctx, api := m.ctx, m.api
	return func() tea.Msg {
		list, err := api.Models(ctx)
		return modelsMsg{list: list, err: err}
	}
}

// modelsLoaded fills the picker, its cursor on the model in use.
func (m *Model) modelsLoaded(msg modelsMsg) {
	m.models.loading, m.models.err, m.models.list = false, msg.err, msg.list
	m.models.cursor = 0
	for i, mi := range msg.list.Models {
		if mi.ID == m.model() {
			m.models.cursor = i
		}
	}
}

// modelsKey handles a key while the model picker is open: enter runs
// the following turns on the model chosen (the session's own model
// clears the choice).
func (m *Model) modelsKey(k tea.KeyPressMsg) tea.Cmd {
	n := len(m.models.list.Models)
	switch k.String() {
	case "esc", "q", "ctrl+c":
		m.overlay = overlayNone
	case "up", "k", "shift+tab":
		if n > 0 {
			m.models.cursor = (m.models.cursor - 1 + n) % n
		}
	case "down", "j", "tab":
		if n > 0 {
			m.models.cursor = (m.models.cursor + 1) % n
		}
	case "enter":
		m.overlay = overlayNone
		if n > 0 {
			m.pinModel(m.models.list.Models[m.models.cursor].ID)
		}
	}
	return nil
}

// pinModel runs the following turns on id ("" or the session's model:
// the session's).
func (m *Model) pinModel(id string) {
	if id == "" || id == m.sessionModel() {
		m.modelPin = ""
		m.setFlash("the next turns run on the session's model ("+m.sessionModel()+")", false)
		return
	}
	m.modelPin = id
	m.setFlash("the next turns run on "+id+" · /model default goes back to the session's", false)
}

// modelsView draws the model picker in a box of width × height.
func (m *Model) modelsView(width, height int) string {
	st := m.st
	inner := max(width-4, 20)
	lines := []string{st.header.Render("models") + st.faint.Render("  ↑↓ choose · enter use for the next turns · esc close")}
	p := m.models
	switch {
	case p.loading:
		lines = append(lines, st.faint.Render("loading…"))
	case p.err != nil:
		lines = append(lines, st.err.Render("could not list the models: "+errText(p.err)),
			st.faint.Render("/model provider:model still runs the next turns on a model you name"))
	case len(p.list.Models) == 0:
		lines = append(lines, st.faint.Render("the server offers no model"))
	}
	for i, mi := range p.list.Models {
		mark := "  "
		if mi.ID == m.model() {
			mark = "● "
		}
		var tags []string
		if mi.ID == p.list.Default {
			tags = append(tags, "the server's default")
		}
		if mi.ID == m.sessionModel() {
			tags = append(tags, "this session's")
		}
		line := mark + mi.ID
		if len(tags) > 0 {
			line += st.faint.Render(" (" + strings.Join(tags, ", ") + ")")
		}
		line = ansi.Truncate(line, inner, "…")
		if i == p.cursor {
			line = st.selected.Render(line + strings.Repeat(" ", max(inner-ansi.StringWidth(line), 0)))
		}
		lines = append(lines, line)
	}
	if len(p.list.Unavailable) > 0 {
		lines = append(lines, "", st.faint.Render("not available here:"))
		for _, u := range p.list.Unavailable {
			lines = append(lines, st.faint.Render(ansi.Truncate("  "+u.Provider+" — "+oneLine(u.Reason), inner, "…")))
		}
	}
	lines = append(lines, "", st.faint.Render(ansi.Truncate("any other provider:model: /model provider:model · /model default: the session's", inner, "…")))
	if len(lines) > max(height-2, 3) {
		// Keep the cursor in sight on a short terminal.
		room := max(height-2, 3)
		first := min(max(p.cursor+1-(room-1), 0), len(lines)-room)
		lines = append([]string{lines[0]}, lines[1+first:first+room]...)
	}
	return st.overlay.Width(width).Render(strings.Join(lines, "\n"))
}
