package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/metis-agent/metis/protocol"
)

// MCPStatus is the answer of GET /mcp: the MCP servers and their tools.
type MCPStatus = protocol.MCPStatus

// MCPServer is one MCP server of a session, as an editor gives it.
type MCPServer = protocol.MCPServerConfig

// MCP asks the server for its MCP servers' status.
func (c *Client) MCP(ctx context.Context) (MCPStatus, error) {
	var st MCPStatus
	err := c.do(ctx, http.MethodGet, "/mcp", nil, &st)
	return st, err
}

// MCPAfter is MCP once the status's version has passed after: the
// server answers at its next change, or after at most 25 s with the
// status unchanged (a long poll, for a client that shows it).
func (c *Client) MCPAfter(ctx context.Context, after uint64) (MCPStatus, error) {
	var st MCPStatus
	err := c.do(ctx, http.MethodGet, "/mcp?after="+strconv.FormatUint(after, 10), nil, &st)
	return st, err
}

// SessionMCP returns the MCP servers a session's turns use.
func (c *Client) SessionMCP(ctx context.Context, sessionID string) (MCPStatus, error) {
	var st MCPStatus
	err := c.do(ctx, http.MethodGet, "/sessions/"+url.PathEscape(sessionID)+"/mcp_servers", nil, &st)
	return st, err
}

// SetSessionMCP makes servers the session's own MCP servers, replacing
// those set before (none clears them), and returns the servers its
// turns use now. A server that does not validate is an error that
// IsInvalidMCPServers reports.
func (c *Client) SetSessionMCP(ctx context.Context, sessionID string, servers []MCPServer) (MCPStatus, error) {
	if servers == nil {
		servers = []MCPServer{}
	}
	var st MCPStatus
	err := c.do(ctx, http.MethodPut, "/sessions/"+url.PathEscape(sessionID)+"/mcp_servers", protocol.MCPSessionServers{Servers: servers}, &st)
	return st, err
}

// IsInvalidMCPServers reports whether err refused a session's MCP
// servers.
func IsInvalidMCPServers(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == protocol.CodeInvalidMCPServers
}
