// Package tool owns the tools an agent can call: the Tool interface, the
// registry of built-in tools, their input schemas, the classified errors
// a tool fails with, and workspace confinement (every path a tool touches
// is resolved through an os.Root opened on the session's workspace).
//
// tool imports message and model (for tool specs) only; dispatching tool
// calls and emitting their events is the agent loop's job.
package tool
