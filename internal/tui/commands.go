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
	modelsMsg      struct {
		list []client.Session
		err  error
	}
	createdMsg struct {
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
			// The server has no list of its models: the ones its
			// sessions use are the ones known to work.
			ctx, api := m.ctx, m.api
			return func() tea.Msg {
				list, err := api.Sessions(ctx)
				return modelsMsg{list: list, err: err}
			}, true
		case "default", "-":
			m.modelPin = ""
			m.setFlash("the next turns run on the session's model ("+m.sessionModel()+")", false)
		default:
			if !strings.Contains(arg, ":") {
				m.setFlash("a model is provider:model, e.g. anthropic:claude-sonnet-4-6 or builtin:demo", true)
				return nil, true
			}
			m.modelPin = arg
			m.setFlash("the next turns run on "+arg+" (a model the server cannot use is refused when you send)", false)
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
		// The server's revert API is not part of this build yet: say so
		// rather than sending "/undo" to the model.
		m.setFlash("/undo: this server cannot revert a turn's file changes yet", true)
		return nil, true
	case "/image":
		m.setFlash("/image: this server does not take images on turns yet", true)
		return nil, true
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
		var known []string
		if strings.Contains(m.model(), ":") {
			known = append(known, m.model())
		}
		for _, s := range msg.list {
			if !slices.Contains(known, s.ActiveModel) && s.ActiveModel != "" {
				known = append(known, s.ActiveModel)
			}
		}
		if !slices.Contains(known, "builtin:demo") {
			known = append(known, "builtin:demo")
		}
		s := "model " + m.model()
		if m.modelPin != "" {
			s += " (chosen here; /model default goes back to the session's)"
		}
		m.setFlash(s+" · in use on this server: "+strings.Join(known, ", ")+" · /model provider:model runs the next turns on another", false)
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
