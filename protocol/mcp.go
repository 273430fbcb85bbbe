package protocol

import "time"

// MCP servers (docs/mcp.md): GET /mcp reports them; PUT and DELETE
// /sessions/{id}/mcp_servers set the servers of one session (what an
// editor hands `metis acp` in session/new and session/load).

// CodeInvalidMCPServers answers (400) a PUT /sessions/{id}/mcp_servers
// whose servers do not all validate; the message names the first bad
// one, and nothing changes.
const CodeInvalidMCPServers = "invalid_mcp_servers"

// Transports of an MCP server.
const (
	MCPTransportStdio = "stdio"
	MCPTransportHTTP  = "http" // streamable HTTP
)

// Scopes of an MCP server: from config.yaml's mcp_servers (every
// session) or set for sessions through the API.
const (
	MCPScopeConfig  = "config"
	MCPScopeSession = "session"
)

// States of an MCP server, as GET /mcp reports them.
const (
	// MCPStateIdle: configured, not started yet; it starts when a turn of
	// a session that has it builds its tool list.
	MCPStateIdle = "idle"
	// MCPStateStarting: its process is starting or it is being
	// connected to, initialized and asked for its tools.
	MCPStateStarting = "starting"
	// MCPStateRunning: connected; its tools are offered.
	MCPStateRunning = "running"
	// MCPStateRestarting: it exited, its connection broke or its start
	// failed; it is started again at RetryAt.
	MCPStateRestarting = "restarting"
	// MCPStateFailed: it failed to start several times in a row; it is
	// tried again when a turn next needs it, not before RetryAt.
	MCPStateFailed = "failed"
	// MCPStateStopped: stopped (the server is shutting down, or the
	// configuration changed and the entry is being replaced).
	MCPStateStopped = "stopped"
	// MCPStateDisabled: configured with enabled: false.
	MCPStateDisabled = "disabled"
	// MCPStateInvalid: its configuration entry is invalid (LastError
	// says why); the other servers are unaffected.
	MCPStateInvalid = "invalid"
)

// MCPStatus is the answer of GET /mcp: every MCP server the server
// knows, configured ones first, each by name.
type MCPStatus struct {
	// Version increases whenever anything in the answer changes; GET
	// /mcp?after=V waits (up to 25 s) for a version above V.
	Version uint64 `json:"version"`
	// ConfigError says why config.yaml's mcp_servers section could not
	// be read at all ("" when it could; bad entries are reported on
	// their own server).
	ConfigError string            `json:"config_error,omitempty"`
	Servers     []MCPServerStatus `json:"servers"`
}

// MCPServerStatus is one MCP server in an MCPStatus.
type MCPServerStatus struct {
	// Name is the server's name: its tools are offered as
	// mcp__<name>__<tool>.
	Name string `json:"name"`
	// Scope is MCPScopeConfig or MCPScopeSession; SessionIDs are the
	// sessions a session-scoped server serves (sessions set with the
	// same server share one).
	Scope      string   `json:"scope"`
	SessionIDs []string `json:"session_ids,omitempty"`
	// Transport is MCPTransportStdio or MCPTransportHTTP ("" for an
	// invalid entry). Command (stdio) or URL (http, without its query
	// and user information) say what it is; arguments, environment and
	// headers are never shown.
	Transport string `json:"transport"`
	Command   string `json:"command,omitempty"`
	URL       string `json:"url,omitempty"`
	// State is one of the MCPState constants.
	State string `json:"state"`
	// Tools are the server's tools as last listed (empty before its
	// first start): those offered, and those skipped with the reason.
	Tools []MCPToolStatus `json:"tools"`
	// LastError is the last failure: a start that failed, an exit, a
	// broken connection, an invalid entry. LastErrorAt is when.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// PID is the stdio server's process id while it runs.
	PID int `json:"pid,omitempty"`
	// Restarts counts the starts after the first.
	Restarts int `json:"restarts"`
	// StartedAt is when the running connection was established; RetryAt
	// when a restarting or failed server is tried again.
	StartedAt *time.Time `json:"started_at,omitempty"`
	RetryAt   *time.Time `json:"retry_at,omitempty"`
	// ServerName, ServerVersion and ProtocolVersion are what the server
	// said of itself at initialization.
	ServerName      string `json:"server_name,omitempty"`
	ServerVersion   string `json:"server_version,omitempty"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// TrustReadOnlyHints is the entry's trust_read_only_hints setting.
	TrustReadOnlyHints bool `json:"trust_read_only_hints,omitempty"`
}

// MCPToolStatus is one tool of an MCP server.
type MCPToolStatus struct {
	// Name is the name the model is offered (mcp__<server>__<tool>);
	// "" for a skipped tool.
	Name string `json:"name,omitempty"`
	// Tool is the server's own name for it.
	Tool string `json:"tool"`
	// Description is the first line of its description.
	Description string `json:"description,omitempty"`
	// ReadOnlyHint is the server's readOnlyHint annotation; Kind is what
	// the permission policy treats it as: "external", or "read" when
	// the entry trusts read-only hints and the hint is set.
	ReadOnlyHint bool   `json:"read_only_hint,omitempty"`
	Kind         string `json:"kind,omitempty"`
	// Problem says why the tool is skipped (not offered), or what was
	// repaired in its input schema.
	Problem string `json:"problem,omitempty"`
	Skipped bool   `json:"skipped,omitempty"`
}

// MCPServerConfig is one MCP server of a session, as PUT
// /sessions/{id}/mcp_servers takes it (ACP's stdio and http shapes):
// Command (stdio, with Args, Env and Cwd) or URL (streamable HTTP, with
// Headers). Env and header values are literal.
type MCPServerConfig struct {
	Name    string            `json:"name"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Cwd is the stdio server's working directory (default the
	// session's workspace).
	Cwd     string            `json:"cwd,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// MCPSessionServers is the body of PUT /sessions/{id}/mcp_servers: the
// session's whole set (an empty list clears it). The answer is the
// session's view of GET /mcp: the servers its turns use.
type MCPSessionServers struct {
	Servers []MCPServerConfig `json:"servers"`
}

// MaxMCPSessionServers bounds the servers of one session.
const MaxMCPSessionServers = 32
