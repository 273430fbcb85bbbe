package tui

import (
	"context"
	"fmt"
	"slices"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/protocol"
)

// What runs beside the conversation: the session's MCP servers (polled,
// a mark on the status line when one is down, /mcp lists them) and its
// background commands (from the view, counted on the activity line, /bg
// lists them).

// mcpEvery is how often the MCP servers' state is asked for; mcpTimeout
// bounds one request.
const (
	mcpEvery   = 5 * time.Second
	mcpTimeout = 10 * time.Second
)

// mcpMsg is the answer of MCP; again schedules the next poll.
type mcpMsg struct {
	st    client.MCPStatus
	err   error
	again bool
}

// pollMCP asks for the session's MCP servers after delay, and again
// every mcpEvery for as long as the screen runs (its context).
func (m *Model) pollMCP(delay time.Duration) tea.Cmd {
	return m.fetchMCP(delay, true)
}

func (m *Model) fetchMCP(delay time.Duration, again bool) tea.Cmd {
	ctx, api, sid := m.ctx, m.api, m.sessionID
	return func() tea.Msg {
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
		cctx, cancel := context.WithTimeout(ctx, mcpTimeout)
		defer cancel()
		st, err := api.MCP(cctx)
		if ctx.Err() != nil {
			return nil
		}
		return mcpMsg{st: sessionServers(st, sid), err: err, again: again}
	}
}

// sessionServers keeps the servers a session's turns use: the
// configured ones (invalid entries included, which the session's own
// list leaves out) and those set for it.
func sessionServers(st client.MCPStatus, sessionID string) client.MCPStatus {
	out := st
	out.Servers = nil
	for _, s := range st.Servers {
		if s.Scope != protocol.MCPScopeSession || slices.Contains(s.SessionIDs, sessionID) {
			out.Servers = append(out.Servers, s)
		}
	}
	return out
}

// mcpResult keeps the servers' state (an error keeps the last known)
// and schedules the next poll.
func (m *Model) mcpResult(msg mcpMsg) tea.Cmd {
	if msg.err == nil {
		st := msg.st
		m.mcp = &st
	}
	if msg.again {
		return m.pollMCP(mcpEvery)
	}
	return nil
}

// mcpDown is true of a server that should run and does not.
func mcpDown(s protocol.MCPServerStatus) bool {
	switch s.State {
	case protocol.MCPStateRestarting, protocol.MCPStateFailed, protocol.MCPStateInvalid:
		return true
	}
	return false
}

// mcpMark is the status line's mark: "mcp: 1 down", "" when none is.
func (m *Model) mcpMark() string {
	if m.mcp == nil {
		return ""
	}
	n := 0
	for _, s := range m.mcp.Servers {
		if mcpDown(s) {
			n++
		}
	}
	if n == 0 && m.mcp.ConfigError == "" {
		return ""
	}
	if n == 0 {
		return "⚠ mcp: config error (/mcp)"
	}
	return fmt.Sprintf("⚠ mcp: %d down (/mcp)", n)
}

// showMCP opens the MCP sheet and asks for a fresh state.
func (m *Model) showMCP() tea.Cmd {
	m.openSheet(sheet{kind: "mcp", title: "MCP servers", hint: "esc closes · states refresh every few seconds"})
	return m.fetchMCP(0, false)
}

// mcpLines are the MCP sheet's lines: a server per line with its state,
// tools and last error.
func (m *Model) mcpLines() []string {
	if m.mcp == nil {
		return []string{m.st.faint.Render("asking the server…")}
	}
	var lines []string
	if e := m.mcp.ConfigError; e != "" {
		lines = append(lines, m.st.err.Render("config.yaml mcp_servers: "+oneLine(e)))
	}
	if len(m.mcp.Servers) == 0 {
		lines = append(lines, m.st.faint.Render("no MCP server is configured for this session (config.yaml mcp_servers; docs/mcp.md)"))
	}
	for _, s := range m.mcp.Servers {
		what := s.Command
		if what == "" {
			what = s.URL
		}
		line := fmt.Sprintf("%s · %s · %s · %s", s.Name, orDash(s.Transport), s.State, plural(len(s.Tools), "tool"))
		if what != "" {
			line += " · " + what
		}
		switch {
		case mcpDown(s):
			line = m.st.err.Render("✗ " + line)
		case s.State == protocol.MCPStateRunning:
			line = m.st.ok.Render("● ") + line
		default:
			line = "○ " + line
		}
		lines = append(lines, line)
		if s.LastError != "" {
			lines = append(lines, m.st.faint.Render("    last error: "+oneLine(s.LastError)))
		}
	}
	return lines
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// bgRunning counts the session's background commands that run.
func (m *Model) bgRunning() int {
	n := 0
	for _, c := range m.view.Background {
		if c.Running {
			n++
		}
	}
	return n
}

// bgLines are the /bg sheet's lines: the session's background commands,
// running and ended, oldest first.
func (m *Model) bgLines() []string {
	list := m.view.BackgroundCommands()
	if len(list) == 0 {
		return []string{m.st.faint.Render("no background command: the model starts one with shell {\"background\": true}")}
	}
	now := time.Now()
	var lines []string
	for _, c := range list {
		if c.Running {
			lines = append(lines, m.st.ok.Render("● ")+fmt.Sprintf("%s running, started %s · $ %s", c.ID, cli.Ago(now, c.StartedAt), oneLine(c.Command)))
			continue
		}
		var d time.Duration
		if c.EndedAt != nil {
			d = c.EndedAt.Sub(c.StartedAt)
		}
		lines = append(lines, "○ "+fmt.Sprintf("%s %s · $ %s", c.ID, bgEnd(c.EndReason, c.ExitCode, d), oneLine(c.Command)))
	}
	return append(lines, "", m.st.faint.Render("They outlive the turn (esc does not stop them); the model reads them with shell_output and stops them with shell_kill."))
}
