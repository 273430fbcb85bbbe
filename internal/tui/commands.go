package tui

import (
	"encoding/json"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/protocol"
)

// errText is an error's text without the client's "metis:" prefix.
func errText(err error) string { return cli.ErrText(err) }

// modes are the permission modes, in the order shift+tab cycles them.
var modes = []string{protocol.ModeDefault, protocol.ModeAcceptEdits, protocol.ModePlan, protocol.ModeAuto}

// Messages of the commands' calls.
type (
	modeSetMsg struct {
		mode string
		err  error
	}
	compactSentMsg struct{ err error }
	createdMsg     struct {
		sess client.Session
		err  error
	}
)

// command runs a slash command the TUI handles itself and reports
// whether text was one. Other text starting with "/" (the demo model's
// /echo, a one-off "/model provider:model text") goes to the model.
func (m *Model) command(text string) (tea.Cmd, bool) {
	name, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/help", "/?":
		m.overlay = overlayHelp
		return nil, true
	case "/quit", "/exit":
		return tea.Quit, true
	case "/new":
		return m.newSession(), true
	case "/sessions", "/resume":
		return m.openPicker(), true
	case "/mode":
		if arg == "" {
			m.setFlash("mode "+m.mode()+" · /mode "+strings.Join(modes, "|")+" changes it (shift+tab cycles)", false)
			return nil, true
		}
		if !slices.Contains(modes, arg) {
			m.setFlash("unknown mode "+arg+": one of "+strings.Join(modes, ", "), true)
			return nil, true
		}
		return m.setMode(arg), true
	case "/model":
		if strings.ContainsAny(arg, " \t\n") {
			return nil, false // "/model X text": a one-off turn on X, the server's own syntax
		}
		switch arg {
		case "":
			return m.openModels(), true
		case "default", "-":
			m.pinModel("")
		default:
			if !strings.Contains(arg, ":") {
				m.setFlash("a model is provider:model, e.g. anthropic:claude-sonnet-4-6 or builtin:demo (/model lists them)", true)
				return nil, true
			}
			m.pinModel(arg)
		}
		return nil, true
	case "/compact":
		if m.busy() {
			m.setFlash("a turn is running: compact once it ends", true)
			return nil, true
		}
		ctx, api, sid := m.ctx, m.api, m.sessionID
		m.compacting = true
		return func() tea.Msg {
			_, err := api.Compact(ctx, sid, arg)
			return compactSentMsg{err: err}
		}, true
	case "/undo":
		return m.undo(), true
	case "/redo":
		return m.redo(), true
	case "/fork":
		return m.fork(), true
	case "/rewind":
		return m.openRewind(), true
	case "/image":
		return m.attachImage(arg), true
	case "/unqueue":
		return m.unqueue(arg), true
	case "/bg":
		m.openSheet(sheet{kind: "bg", title: "background commands", hint: "esc closes"})
		return nil, true
	case "/mcp":
		return m.showMCP(), true
	}
	return nil, false
}

// mode is the session's permission mode as last seen.
func (m *Model) mode() string {
	if m.view.Mode != "" {
		return m.view.Mode
	}
	var s struct {
		Mode string `json:"mode"`
	}
	_ = json.Unmarshal(m.view.Session, &s)
	if s.Mode != "" {
		return s.Mode
	}
	return protocol.ModeDefault
}

// setMode asks the server for a mode; session.mode_changed shows it.
func (m *Model) setMode(mode string) tea.Cmd {
	ctx, api, sid := m.ctx, m.api, m.sessionID
	return func() tea.Msg {
		_, err := api.SetMode(ctx, sid, mode)
		return modeSetMsg{mode: mode, err: err}
	}
}

// nextMode is the mode after the current one (shift+tab).
func (m *Model) nextMode() string {
	i := slices.Index(modes, m.mode())
	return modes[(i+1)%len(modes)]
}

// newSession creates a session in this workspace and switches to it.
func (m *Model) newSession() tea.Cmd {
	ctx, api, ws := m.ctx, m.api, m.workspace
	m.setFlash("creating a session in "+ws+"…", false)
	return func() tea.Msg {
		s, err := api.Create(ctx, client.CreateOptions{Workspace: ws, AllowHome: true})
		return createdMsg{sess: s, err: err}
	}
}

// switchTo ends this screen and has Run open session id.
func (m *Model) switchTo(id string) tea.Cmd {
	if id == "" || id == m.sessionID {
		m.overlay = overlayNone
		return nil
	}
	m.next = id
	return tea.Quit
}

// commandResult handles the answers of the commands' calls.
func (m *Model) commandResult(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case modeSetMsg:
		if msg.err != nil {
			m.setFlash("mode not changed: "+errText(msg.err), true)
		} else {
			m.view.Mode = msg.mode
			m.setFlash("mode "+msg.mode, false)
		}
	case modelsMsg:
		m.modelsLoaded(msg)
	case attachedMsg:
		m.attachedResult(msg)
	case unqueuedMsg:
		if msg.err != nil {
			m.setFlash("not taken out of the queue: "+errText(msg.err), true)
		} else {
			m.setFlash("taken out of the queue: "+msg.preview, false)
		}
	case turnsMsg:
		m.askUndo(msg)
	case revertedMsg:
		m.reverted(msg)
	case rewoundMsg:
		return m.rewound(msg)
	case forkedMsg:
		if msg.err != nil {
			m.setFlash("not forked: "+errText(msg.err), true)
			return nil
		}
		return m.switchTo(msg.res.ID)
	case mcpMsg:
		return m.mcpResult(msg)
	case compactSentMsg:
		if msg.err != nil {
			m.compacting = false
			m.setFlash("not compacted: "+errText(msg.err), true)
		}
	case createdMsg:
		if msg.err != nil {
			m.setFlash("no new session: "+errText(msg.err), true)
			return nil
		}
		return m.switchTo(msg.sess.ID)
	}
	return nil
}
