package acp

import (
	"context"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
)

// mcpCapabilities are the MCP transports metis connects to: stdio (every
// agent's) and streamable HTTP. The old HTTP+SSE transport and MCP over
// ACP are not offered.
var mcpCapabilities = sdk.McpCapabilities{Http: true}

// mcpServers turns the MCP servers an editor gives session/new or
// session/load into a metis session's servers: stdio ones run in the
// session's working directory. Servers of a transport metis does not
// offer (sse, acp) are left out, and named in skipped.
func mcpServers(in []sdk.McpServer, cwd string) (out []client.MCPServer, skipped []string) {
	out = []client.MCPServer{}
	for _, s := range in {
		switch {
		case s.Stdio != nil:
			env := map[string]string{}
			for _, e := range s.Stdio.Env {
				env[e.Name] = e.Value
			}
			out = append(out, client.MCPServer{Name: s.Stdio.Name, Command: s.Stdio.Command, Args: s.Stdio.Args, Env: env, Cwd: cwd})
		case s.Http != nil:
			headers := map[string]string{}
			for _, h := range s.Http.Headers {
				headers[h.Name] = h.Value
			}
			out = append(out, client.MCPServer{Name: s.Http.Name, URL: s.Http.Url, Headers: headers})
		case s.Sse != nil:
			skipped = append(skipped, s.Sse.Name+" (sse)")
		case s.Acp != nil:
			skipped = append(skipped, s.Acp.Name+" (acp)")
		default:
			skipped = append(skipped, "(a server of an unknown transport)")
		}
	}
	return out, skipped
}

// setMCP makes the editor's MCP servers the session's own (ACP's
// mcpServers apply to that session only). For session/new (fresh) an
// empty list changes nothing; for session/load and session/resume the
// list replaces what the session had. A server the metis server refuses
// is an invalid-params error naming it; a server too old to have the
// endpoint is only logged.
func (a *Agent) setMCP(ctx context.Context, sid, cwd string, in []sdk.McpServer, fresh bool) error {
	servers, skipped := mcpServers(in, cwd)
	if len(skipped) > 0 {
		a.log.Warn("MCP servers left out: their transport is not supported (stdio and http are)", "session", sid, "servers", skipped)
	}
	if fresh && len(servers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	st, err := a.c.SetSessionMCP(ctx, sid, servers)
	if err != nil {
		if client.IsInvalidMCPServers(err) {
			return apiError("mcpServers", err)
		}
		a.log.Warn("the session's MCP servers could not be set", "session", sid, "err", err)
		return nil
	}
	a.mu.Lock()
	if len(servers) > 0 {
		a.mcpSessions[sid] = true
	} else {
		delete(a.mcpSessions, sid)
	}
	a.mu.Unlock()
	a.log.Info("session MCP servers set", "session", sid, "servers", len(servers), "reported", len(st.Servers))
	return nil
}

// clearMCP clears the MCP servers this agent set, as it stops: they
// were the editor's, and the editor is gone (their processes stop when
// no session uses them).
func (a *Agent) clearMCP() {
	a.mu.Lock()
	var sids []string
	for sid := range a.mcpSessions {
		sids = append(sids, sid)
	}
	a.mcpSessions = map[string]bool{}
	a.mu.Unlock()
	if len(sids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, sid := range sids {
		if _, err := a.c.SetSessionMCP(ctx, sid, nil); err != nil {
			a.log.Warn("the session's MCP servers could not be cleared", "session", sid, "err", err)
		}
	}
}
