package tui

import (
	"context"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
)

// The header's title is the server's: the session summary's title, from
// the snapshot (attach, a reconnect), then from session.updated as soon
// as any client renames (or archives) the session, and asked again
// (GET /sessions/{id}) when a turn starts, since the first one names the
// session without an event. The server derives a short clean title from
// the first prompt and keeps a rename as typed; the TUI never derives
// one itself.

// titleTimeout bounds one request for the title.
const titleTimeout = 10 * time.Second

// titleMsg is the answer of titleFetch: the summary's title, or err.
type titleMsg struct {
	seq   int
	title string
	err   error
}

// titleFetch asks the server for the session's title when an event said
// it may have changed (nil otherwise).
func (m *Model) titleFetch() tea.Cmd {
	if !m.titleAsk {
		return nil
	}
	m.titleAsk = false
	m.titleSeq++
	ctx, api, sid, seq := m.ctx, m.api, m.sessionID, m.titleSeq
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, titleTimeout)
		defer cancel()
		a, err := api.Attach(cctx, sid)
		if ctx.Err() != nil {
			return nil
		}
		return titleMsg{seq: seq, title: a.Session.Title, err: err}
	}
}

// titled takes the title of an answer newer than the last one taken;
// a failed request keeps the title shown (the next turn asks again).
func (m *Model) titled(msg titleMsg) {
	if msg.err != nil || msg.seq < m.titleGot || msg.title == "" {
		return
	}
	m.titleGot, m.title = msg.seq, msg.title
}

// edited takes a rename or an archive of the session (session.updated,
// already folded into the view's summary). An answer to a title request
// made before it is older than the rename, so it is dropped.
func (m *Model) edited() {
	m.fromSummary()
	m.titleGot = m.titleSeq + 1
}

// maxTitle is the length of a turn's prompt, in runes, where /undo cuts
// it.
const maxTitle = 80

// titleOf is a turn's prompt on one line for /undo's question: white
// space collapsed, cut at maxTitle runes with "…".
func titleOf(text string) string {
	t := oneLine(text)
	if utf8.RuneCountInString(t) > maxTitle {
		r := []rune(t)
		t = string(r[:maxTitle-1]) + "…"
	}
	return t
}
