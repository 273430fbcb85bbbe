// Package permission owns the policy that decides, before a tool call
// runs, whether it runs, asks the user first, or is refused
// (docs/permissions.md). It knows the session modes (default,
// accept_edits, plan, auto), the rules of <home>/config.yaml
// (`permissions: {allow, ask, deny}`) and of "allow for this session"
// answers, and how to judge a call's input against them: a file tool's
// workspace-relative paths, a fetch tool's URL, and a shell command
// line, which it splits with a real shell parser (mvdan.cc/sh) into the
// simple commands it runs so that each is judged on its own.
//
// The policy is pure: it holds no state of sessions, emits nothing and
// waits for nothing. The agent loop asks it about each call through the
// session manager, which supplies the session's mode and rules and keeps
// the pending approvals.
//
// permission imports tool (what a tool does: tool.Kind, and the targets
// a tool's rules match on) and the shell parser; never a transport.
package permission
