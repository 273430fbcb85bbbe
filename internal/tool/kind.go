package tool

import "encoding/json"

// Kind says what a tool does, for the permission policy
// (docs/permissions.md): the mode decides per kind whether a call runs,
// asks or is refused, and rules narrow or widen that by tool name and by
// the call's targets.
type Kind string

// Tool kinds, from the least to the most consequential.
const (
	// KindRead tools only read the workspace (read_file, list_dir, glob,
	// grep). They run in every mode.
	KindRead Kind = "read"
	// KindEdit tools change files inside the workspace (write_file,
	// edit_file, apply_patch).
	KindEdit Kind = "edit"
	// KindExecute tools run commands (shell).
	KindExecute Kind = "execute"
	// KindFetch tools reach the network (web_fetch).
	KindFetch Kind = "fetch"
	// KindDelegate tools start worker sessions, which are governed by
	// the same policy in the planner's mode.
	KindDelegate Kind = "delegate"
	// KindExternal tools come from outside metis (MCP servers): what
	// they do is unknown, so they are treated with the most care.
	KindExternal Kind = "external"
)

// Classified is implemented by tools that say what they do. A tool that
// does not is treated as KindExternal.
type Classified interface {
	Kind() Kind
}

// Targeted is implemented by tools whose permission rules match on part
// of the call's input: a file tool's paths (relative to the workspace,
// slash-separated, cleaned), the shell's command line, a fetch tool's
// URL. An error means the input cannot be judged: the call is then not
// allowed by a rule and falls back to asking (or to its refusal in
// plan mode); the tool itself reports the bad input when it runs.
type Targeted interface {
	Targets(input json.RawMessage) ([]string, error)
}

// KindOf returns what t says it does, KindExternal when it does not say.
func KindOf(t Tool) Kind {
	if c, ok := t.(Classified); ok {
		return c.Kind()
	}
	return KindExternal
}
