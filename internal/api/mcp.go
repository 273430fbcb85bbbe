package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/metis-agent/metis/internal/mcp"
	"github.com/metis-agent/metis/protocol"
)

// MCP is what the MCP endpoints need: internal/mcp's Manager.
type MCP interface {
	Status() protocol.MCPStatus
	Version() (uint64, <-chan struct{})
	SessionStatus(ctx context.Context, sessionID string) protocol.MCPStatus
	SetSessionServers(ctx context.Context, sessionID, workspace string, servers []protocol.MCPServerConfig) (protocol.MCPStatus, error)
}

// mcpLongPoll bounds the wait of GET /mcp?after=V.
const mcpLongPoll = 25 * time.Second

// MountMCP serves the MCP servers' status and the servers of a session
// (docs/protocol.md, "MCP servers"):
//
//	GET /mcp[?after=V]                    every server (after=V: once the version passes V)
//	GET /sessions/{id}/mcp_servers        the servers the session's turns use
//	PUT /sessions/{id}/mcp_servers        {"servers": [...]}: the session's own servers
//	DELETE /sessions/{id}/mcp_servers     clears them
func (a *API) MountMCP(m MCP) {
	a.route("/mcp", map[string]http.HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) { a.mcpStatus(w, r, m) }})
	a.route("/sessions/{id}/mcp_servers", map[string]http.HandlerFunc{
		"GET":    func(w http.ResponseWriter, r *http.Request) { a.sessionMCP(w, r, m, nil, false) },
		"PUT":    func(w http.ResponseWriter, r *http.Request) { a.putSessionMCP(w, r, m) },
		"DELETE": func(w http.ResponseWriter, r *http.Request) { a.sessionMCP(w, r, m, nil, true) },
	})
}

func (a *API) mcpStatus(w http.ResponseWriter, r *http.Request, m MCP) {
	if s := r.URL.Query().Get("after"); s != "" {
		after, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "after must be a status version (a non-negative integer)")
			return
		}
		t := time.NewTimer(mcpLongPoll)
		defer t.Stop()
		for {
			v, changed := m.Version()
			if v > after {
				break
			}
			select {
			case <-changed:
				continue
			case <-r.Context().Done():
				return
			case <-t.C:
			}
			break
		}
	}
	writeJSON(w, http.StatusOK, m.Status())
}

func (a *API) putSessionMCP(w http.ResponseWriter, r *http.Request, m MCP) {
	if servers, ok := decodeMCPServers(w, r); ok {
		a.sessionMCP(w, r, m, servers, true)
	}
}

// decodeMCPServers reads a PUT /sessions/{id}/mcp_servers body (the
// cluster front decodes it so too).
func decodeMCPServers(w http.ResponseWriter, r *http.Request) ([]protocol.MCPServerConfig, bool) {
	var body protocol.MCPSessionServers
	if !decode(w, r, &body, false) {
		return nil, false
	}
	if body.Servers == nil {
		body.Servers = []protocol.MCPServerConfig{}
	}
	return body.Servers, true
}

// sessionMCP answers with the session's view of the servers, after
// setting its own servers to servers when set is true.
func (a *API) sessionMCP(w http.ResponseWriter, r *http.Request, m MCP, servers []protocol.MCPServerConfig, set bool) {
	s, err := a.sessions.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	if !set {
		writeJSON(w, http.StatusOK, m.SessionStatus(r.Context(), s.ID))
		return
	}
	st, err := m.SetSessionServers(r.Context(), s.ID, s.WorkspacePath, servers)
	switch {
	case errors.Is(err, mcp.ErrInvalidServers):
		WriteError(w, http.StatusBadRequest, protocol.CodeInvalidMCPServers, err.Error())
	case errors.Is(err, mcp.ErrClosed):
		WriteError(w, http.StatusServiceUnavailable, CodeShuttingDown, err.Error())
	case err != nil:
		a.writeErr(w, r, err)
	default:
		writeJSON(w, http.StatusOK, st)
	}
}
