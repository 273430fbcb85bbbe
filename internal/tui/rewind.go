package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
)

// Rewind (/rewind): go back to before one of your earlier prompts and
// ask again. The TUI lists the prompts that began a turn, newest first;
// enter forks the session just before the chosen one (the fork holds
// the conversation up to the message before it, POST
// /sessions/{id}/fork with that message_id), f does the same and puts
// the workspace's files back as they were then (checkpoint), and the
// copy opens with the prompt in the composer, to edit and send. The
// session rewound stays as it was: a rewind is a fork, never a loss.

// rewindPoint is a prompt that can be rewound to.
type rewindPoint struct {
	turnID string
	prompt string // the prompt's text
	before string // the last message before it: the fork's message_id
	images int    // images the prompt carried (not carried into the composer)
}

// rewinder is the /rewind overlay.
type rewinder struct {
	points []rewindPoint // newest first
	cursor int
	busy   bool // the fork is being made
}

// rewoundMsg is the answer of the rewind's fork.
type rewoundMsg struct {
	res   client.ForkResult
	point rewindPoint
	files bool
	err   error
}

// rewindPoints are the prompts of the messages held that began a turn
// and have a message before them, newest first. The session's first
// prompt has none (a fork holds at least one message): /new starts
// afresh instead.
func rewindPoints(msgs []*client.Message) []rewindPoint {
	var out []rewindPoint
	for i := len(msgs) - 1; i >= 1; i-- {
		m, prev := msgs[i], msgs[i-1]
		if m.Role != "user" || m.TurnID == "" || prev.TurnID == m.TurnID {
			continue // not a prompt, or one steered into a turn
		}
		p := rewindPoint{turnID: m.TurnID, before: prev.ID}
		var texts []string
		for _, b := range m.Blocks {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "image":
				p.images++
			}
		}
		p.prompt = strings.Join(texts, "\n")
		out = append(out, p)
	}
	return out
}

// openRewind shows the prompts to rewind to.
func (m *Model) openRewind() tea.Cmd {
	if m.busy() {
		m.setFlash("a turn is running: /rewind once it ends (or esc to cancel it)", true)
		return nil
	}
	points := rewindPoints(m.view.Messages)
	if len(points) == 0 {
		m.setFlash("nothing to rewind to: /rewind goes back to before a prompt that followed another (/new starts afresh)", false)
		return nil
	}
	m.rewind = rewinder{points: points}
	m.overlay = overlayRewind
	return nil
}

// rewindKey handles a key while the rewind list is open: ↑↓ choose,
// enter rewinds the conversation, f the conversation and the files, esc
// closes; while the fork is being made only ctrl+c counts.
func (m *Model) rewindKey(k tea.KeyPressMsg) tea.Cmd {
	if m.rewind.busy {
		if k.String() == "ctrl+c" { // the fork is slow to come: quit as anywhere
			m.overlay = overlayNone
			return m.ctrlC()
		}
		return nil
	}
	n := len(m.rewind.points)
	switch k.String() {
	case "esc", "q", "ctrl+c":
		m.overlay = overlayNone
	case "up", "k", "shift+tab":
		m.rewind.cursor = (m.rewind.cursor - 1 + n) % n
	case "down", "j", "tab":
		m.rewind.cursor = (m.rewind.cursor + 1) % n
	case "enter":
		return m.rewindTo(m.rewind.points[m.rewind.cursor], false)
	case "f":
		return m.rewindTo(m.rewind.points[m.rewind.cursor], true)
	}
	return nil
}

// rewindTo forks the session just before p.
func (m *Model) rewindTo(p rewindPoint, files bool) tea.Cmd {
	m.rewind.busy = true
	ctx, api, sid := m.ctx, m.api, m.sessionID
	return func() tea.Msg {
		res, err := api.Fork(ctx, sid, client.ForkRequest{MessageID: p.before, Checkpoint: files})
		return rewoundMsg{res: res, point: p, files: files, err: err}
	}
}

// rewound opens the fork with the prompt in its composer, or says why
// there is none.
func (m *Model) rewound(msg rewoundMsg) tea.Cmd {
	m.rewind.busy = false
	if msg.err != nil {
		m.overlay = overlayNone
		m.setFlash("not rewound: "+errText(msg.err), true)
		return nil
	}
	flash := "rewound: a copy of the session before that prompt · the session you left is unchanged"
	switch {
	case msg.files && msg.res.RestoreError != "":
		flash = "rewound, but the files were not put back: " + msg.res.RestoreError
	case msg.files && msg.res.Restored != nil:
		flash = fmt.Sprintf("rewound with the files: %d restored, %d removed · the session you left is unchanged",
			len(msg.res.Restored.Restored), len(msg.res.Restored.Removed))
	case msg.files:
		flash = "rewound; the files already were as before that prompt · the session you left is unchanged"
	}
	if msg.point.images > 0 {
		flash += fmt.Sprintf(" · the prompt's %d image(s) are not in the composer: /image adds them again", msg.point.images)
	}
	m.nextDraft, m.nextFlash = msg.point.prompt, flash
	return m.switchTo(msg.res.ID)
}

// rewindView draws the rewind list in a box of width × height.
func (m *Model) rewindView(width, height int) string {
	st := m.st
	inner := max(width-4, 20)
	hint := "  ↑↓ choose · enter rewinds the conversation · f also the files · esc close"
	if m.rewind.busy {
		hint = "  rewinding…"
	}
	lines := []string{st.header.Render("rewind to before a prompt") + st.faint.Render(hint)}
	rows := max(height-4, 1)
	first := 0
	if m.rewind.cursor >= rows {
		first = m.rewind.cursor - rows + 1
	}
	for i := first; i < len(m.rewind.points) && i < first+rows; i++ {
		p := m.rewind.points[i]
		text := oneLine(p.prompt)
		if p.images > 0 {
			text += fmt.Sprintf(" [%d image(s)]", p.images)
		}
		line := ansi.Truncate(fmt.Sprintf("%2d  › %s", i+1, text), inner, "…")
		if i == m.rewind.cursor {
			line = st.selected.Render(line + strings.Repeat(" ", max(inner-ansi.StringWidth(line), 0)))
		}
		lines = append(lines, line)
	}
	lines = append(lines, st.faint.Render(ansi.Truncate("A rewind makes a copy: this session stays as it is.", inner, "…")))
	return st.overlay.Width(width).Render(strings.Join(lines, "\n"))
}
