// Package mcp owns the Model Context Protocol servers whose tools metis
// offers to models (docs/mcp.md): config.yaml's mcp_servers (watched
// and reloaded) and the servers set for one session (ACP's mcpServers);
// each server's lifecycle (a stdio server started when a session first
// needs it, in its own process group with the tools' environment, and
// restarted with backoff when it dies; a streamable HTTP server
// reconnected when its session is lost); its tools, listed at start and
// on notifications/tools/list_changed, named mcp__<server>__<tool>
// with names every provider accepts, their input schemas checked; the
// calls, whose results become tool results; and the status GET /mcp
// reports.
//
// The Manager is a tool.Source: the agent loop asks it for a session's
// tools when it builds a model call's tool list, and runs those tools
// through its dispatcher like the built-in ones.
//
// mcp imports tool, model (tool specs), safefile (config.yaml),
// protocol (the status's wire types), yaml and the MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk), which speaks the protocol
// and both transports.
package mcp
