// Package tool owns the tools an agent can call: the Tool interface, the
// registry of built-in tools (and, per turn, of a Source's tools: the
// MCP servers', source.go), their input schemas, the classified errors
// a tool fails with, workspace confinement (every path a file tool
// touches is resolved through an os.Root opened on the session's
// workspace), the environment tool processes get (an allow-list, never
// credentials), and the shell's supervisor, which on Linux keeps every
// process a command starts in reach until the call ends.
//
// tool imports message and model (for tool specs) only; dispatching tool
// calls and emitting their events is the agent loop's job.
package tool
