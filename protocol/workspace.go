package protocol

// Error codes of POST /sessions (400) for a workspace_path metis will
// not use as a workspace (docs/protocol.md, "POST /sessions"). A path
// that is not an absolute path to an existing directory stays
// CodeInvalidRequest.
const (
	// CodeWorkspaceForbidden: the filesystem root, a system directory
	// (/etc, /usr, /var, …), or a path inside /proc, /sys or /dev,
	// judged after following symbolic links. Choose a project directory.
	CodeWorkspaceForbidden = "workspace_forbidden"
	// CodeWorkspaceHome: the user's home directory itself (or a
	// directory that holds it). Send "allow_home": true to confirm it.
	CodeWorkspaceHome = "workspace_home"
)
