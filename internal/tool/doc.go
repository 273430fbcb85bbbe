// Package tool owns the tools an agent can call: the Tool interface, the
// registry of built-in tools and which of them each model is offered
// (and, per turn, a Source's tools: the MCP servers', source.go),
// their input schemas, the classified errors a tool fails with,
// workspace confinement (every path a file tool touches is resolved
// through an os.Root opened on the session's workspace), the file
// tools (read, write, edit_file, apply_patch) and the unified diffs of
// what they change (Change, Previewer), the searches (glob, grep, with
// .gitignore matching), web_fetch and the addresses it refuses, the
// environment tool processes get (an allow-list, never credentials),
// and the shell's supervisor, which on Linux keeps every process a
// command starts in reach until the call ends and starts it through
// the sandbox's exec stage, and the background commands (shell with
// background: true, shell_output, shell_kill; background.go), which
// belong to their session rather than to a call.
//
// tool imports message and model (for tool specs), sandbox (the
// shell's confinement) and protocol (the wire shape of background
// commands); dispatching tool calls and emitting their events
// is the agent loop's job.
package tool
