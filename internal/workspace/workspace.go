// Package workspace decides which directories may be a session's
// workspace: the directory its file tools are confined to and its
// commands run in. A workspace that is the filesystem root or a system
// directory would make that confinement mean nothing, so they are
// refused, and the user's home directory itself (or a directory that
// holds it) is refused unless the client confirms it. The rule lives
// here alone; the session manager applies it to every session it
// creates, whichever client asked (the HTTP API, the TUI, the ACP
// agent, a delegation).
//
// workspace imports only the standard library.
package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Errors of Check, wrapped in an *Error.
var (
	// ErrInvalid: the path is not absolute, does not exist, or is not a
	// directory.
	ErrInvalid = errors.New("not an absolute path to an existing directory")
	// ErrForbidden: the filesystem root, a system directory, or a path
	// inside a kernel pseudo-filesystem.
	ErrForbidden = errors.New("not allowed as a workspace")
	// ErrHome: the user's home directory, or a directory that holds it,
	// without the client's confirmation.
	ErrHome = errors.New("the home directory needs confirmation")
)

// Error is a refused workspace: the path asked for, the directory it
// resolved to (symbolic links followed), and why.
type Error struct {
	Path     string // as asked
	Resolved string // after cleaning and following symbolic links; "" if it could not be resolved
	Kind     error  // ErrInvalid, ErrForbidden or ErrHome
	Reason   string // a sentence for the user
}

func (e *Error) Error() string {
	if e.Resolved != "" && e.Resolved != filepath.Clean(e.Path) {
		return fmt.Sprintf("workspace %q (%s): %s", e.Path, e.Resolved, e.Reason)
	}
	return fmt.Sprintf("workspace %q: %s", e.Path, e.Reason)
}

func (e *Error) Unwrap() error { return e.Kind }

// Policy is what Check needs besides the path.
type Policy struct {
	// Home is the user's home directory ("" for none known): refused as
	// a workspace, with every directory above it, unless allowed.
	Home string
}

// DefaultPolicy is the policy of the process's user: its home directory
// from $HOME (os.UserHomeDir).
func DefaultPolicy() Policy {
	home, _ := os.UserHomeDir()
	return Policy{Home: home}
}

// pseudo are kernel pseudo-filesystems: nothing inside them is a
// project.
var pseudo = []string{"/proc", "/sys", "/dev"}

// system are directories refused as workspaces themselves (what is
// below them is not: /usr/local/src/project or /var/www/site may be
// projects). The root, every top-level directory a Linux or macOS
// system keeps its programs, libraries, configuration, state, devices,
// mounts or other users in, and the system's own subtrees of /usr and
// /var.
var system = map[string]bool{
	"/bin": true, "/boot": true, "/dev": true, "/etc": true, "/home": true, "/lost+found": true,
	"/media": true, "/mnt": true, "/opt": true, "/proc": true, "/root": true, "/run": true, "/sbin": true,
	"/snap": true, "/srv": true, "/sys": true, "/tmp": true, "/usr": true, "/var": true, "/nix": true,
	"/usr/bin": true, "/usr/sbin": true, "/usr/lib": true, "/usr/lib32": true, "/usr/lib64": true,
	"/usr/libx32": true, "/usr/libexec": true, "/usr/include": true, "/usr/share": true, "/usr/src": true,
	"/usr/local": true, "/usr/local/bin": true, "/usr/local/sbin": true, "/usr/local/lib": true,
	"/usr/local/share": true, "/usr/local/include": true, "/usr/local/etc": true,
	"/var/lib": true, "/var/log": true, "/var/cache": true, "/var/spool": true, "/var/tmp": true,
	"/var/run": true, "/var/lock": true, "/var/mail": true, "/var/backups": true, "/var/opt": true,
	"/var/local": true, "/nix/store": true,
	// macOS
	"/System": true, "/Library": true, "/Applications": true, "/Users": true, "/Volumes": true,
	"/private": true, "/private/etc": true, "/private/var": true, "/private/tmp": true, "/cores": true,
}

// Check decides whether path may be a workspace and returns the
// directory to use: the path cleaned, with every symbolic link
// followed, so the decision and the confinement see the same
// directory (a link to / is /). allowHome confirms the user's home
// directory (or a directory holding it). A refusal is an *Error
// wrapping ErrInvalid, ErrForbidden or ErrHome.
func (p Policy) Check(path string, allowHome bool) (string, error) {
	if path == "" || !filepath.IsAbs(path) {
		return "", &Error{Path: path, Kind: ErrInvalid, Reason: "workspace_path must be an absolute path"}
	}
	dir, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil {
		return "", &Error{Path: path, Kind: ErrInvalid, Reason: "not an existing directory"}
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", &Error{Path: path, Resolved: dir, Kind: ErrInvalid, Reason: "not an existing directory"}
	}
	if dir == "/" {
		return "", &Error{Path: path, Resolved: dir, Kind: ErrForbidden,
			Reason: "the filesystem root cannot be a workspace: its tools could reach every file; choose a project directory"}
	}
	for _, ps := range pseudo {
		if dir == ps || strings.HasPrefix(dir, ps+"/") {
			return "", &Error{Path: path, Resolved: dir, Kind: ErrForbidden,
				Reason: ps + " is a kernel pseudo-filesystem, not a project; choose a project directory"}
		}
	}
	// The home itself needs confirmation, even where a system directory
	// is one (root's /root); a directory above it that is a system
	// directory (/home, /Users) holds other users' homes: refused below.
	if home := resolve(p.Home); home != "" && (dir == home || strings.HasPrefix(home, dir+"/") && !system[dir]) {
		if allowHome {
			return dir, nil
		}
		what := "your home directory"
		if dir != home {
			what = "a directory that holds your home directory"
		}
		return "", &Error{Path: path, Resolved: dir, Kind: ErrHome,
			Reason: what + " would give the agent's tools every file in it (keys, mail, other projects); choose a project directory, or confirm with allow_home"}
	}
	if system[dir] || isLibDir(dir) {
		return "", &Error{Path: path, Resolved: dir, Kind: ErrForbidden,
			Reason: dir + " is a system directory; choose a project directory"}
	}
	return dir, nil
}

// isLibDir reports a top-level library directory (/lib, /lib32, /lib64,
// /libx32, …).
func isLibDir(dir string) bool {
	return strings.HasPrefix(dir, "/lib") && !strings.Contains(dir[1:], "/")
}

// resolve cleans a directory and follows its symbolic links; "" when it
// cannot.
func resolve(dir string) string {
	if dir == "" || !filepath.IsAbs(dir) {
		return ""
	}
	r, err := filepath.EvalSymlinks(filepath.Clean(dir))
	if err != nil {
		return filepath.Clean(dir)
	}
	return r
}
