// Package acp is metis as an Agent Client Protocol agent (`metis acp`):
// the edge that editors (Zed, JetBrains IDEs, Neovim, Emacs) launch and
// talk to over stdio, in newline-delimited JSON-RPC (ACP protocol
// version 1).
//
// It owns the ACP side only: the method handlers (initialize, session/new,
// session/load, session/list, session/resume, session/close,
// session/prompt, session/cancel, session/set_mode,
// session/set_config_option), the mapping of a metis session's event
// stream onto session/update notifications (diffs included): a prompt's
// turn while it runs, and each open session's renames and mode changes
// at any time (watch.go), approval
// requests asked as session/request_permission, metis's slash commands,
// the replay of a stored conversation and its catalog events for
// session/load, the editor's mcpServers handed to the session (mcp.go),
// and a guard in front of the SDK that
// answers malformed input with JSON-RPC errors. It drives a metis server
// as an ordinary client: every turn, cancel and history read goes through
// the public client package, so the TUI and the dashboard see an ACP turn
// exactly as they see their own.
//
// acp imports client, protocol, the token leaf (to find the server's
// bearer token), the ACP Go SDK (github.com/coder/acp-go-sdk) and ulid
// (a cursor at a session's start); never the server core. When no server
// answers, the command's caller supplies a way to start one in-process
// (Options.StartServer).
package acp
