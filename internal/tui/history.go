package tui

import (
	"encoding/json"

	tea "charm.land/bubbletea/v2"
)

// olderPage is how many older messages one page load asks for.
const olderPage = 50

// olderMsg carries a page of messages older than before.
type olderMsg struct {
	before  string
	page    []json.RawMessage
	hasMore bool
	err     error
}

// loadOlder asks for the page of messages before the view's first one
// when the user has scrolled to the top and the snapshot said older ones
// exist. One load runs at a time.
func (m *Model) loadOlder() tea.Cmd {
	if m.loadingOlder || !m.view.HasOlder || len(m.view.Messages) == 0 || !m.vp.AtTop() {
		return nil
	}
	m.loadingOlder = true
	m.dirty = true
	ctx, api, sid, before := m.ctx, m.api, m.sessionID, m.view.Messages[0].ID
	return func() tea.Msg {
		page, more, err := api.Messages(ctx, sid, before, olderPage)
		return olderMsg{before: before, page: page, hasMore: more, err: err}
	}
}

// older puts a loaded page in front of the conversation, keeping the
// lines the user was looking at in place. A page that no longer fits
// (the view was rebuilt from a new snapshot meanwhile) is dropped.
func (m *Model) older(msg olderMsg) {
	m.loadingOlder = false
	m.dirty = true
	if msg.err != nil {
		m.setFlash("could not load older messages: "+msg.err.Error(), true)
		return
	}
	if len(m.view.Messages) == 0 || m.view.Messages[0].ID != msg.before {
		return
	}
	lines, offset := m.vp.TotalLineCount(), m.vp.YOffset()
	if m.view.PrependMessages(msg.page, msg.hasMore) == 0 {
		return
	}
	m.render()
	m.vp.SetYOffset(offset + m.vp.TotalLineCount() - lines)
}

// olderHint is the line above the first message while older ones exist.
func (m *Model) olderHint() string {
	switch {
	case m.loadingOlder:
		return m.st.faint.Render("loading older messages…")
	case m.view.HasOlder:
		return m.st.faint.Render("↑ older messages: scroll up (pgup) to load them")
	}
	return ""
}
