package tool

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/metis-agent/metis/internal/editor"
)

// The editor's file system (docs/editors.md): when a client attached to
// the session offers its editor's files, read_file, write_file and
// edit_file read the editor's buffer (unsaved changes included) and
// write through the editor, after every check they make on disk
// (confinement to the workspace, symbolic links, hard links, regular
// files, sizes, binary files). Whatever the editor cannot serve (no
// editor, gone, busy, too slow, a refusal) is served by the disk, and
// the result says which path served it (Result.Via).

// Editor is what the tools ask of the editors attached to sessions
// (an *editor.Broker).
type Editor interface {
	Offers(sessionID string) editor.Caps
	ReadTextFile(ctx context.Context, sessionID, toolUseID, path string) (string, error)
	WriteTextFile(ctx context.Context, sessionID, toolUseID, path, content string) error
}

// Which path served a file tool (Result.Via, tool.completed "via").
const (
	ViaEditor = "editor"
	ViaDisk   = "disk"
)

// editorCaps reports what the session's editor offers (nothing without
// one).
func editorCaps(env Env) editor.Caps {
	if env.Editor == nil || env.SessionID == "" || env.Workspace == "" {
		return editor.Caps{}
	}
	return env.Editor.Offers(env.SessionID)
}

// editorPath returns the absolute path the editor is given for p (a
// resolved, workspace-relative path the disk checks accepted): the
// workspace's path joined with p. The editor opens it with its own
// rights, so the path is checked once more with every symbolic link
// resolved (the file's directory for a file not created yet): it must
// lie inside the workspace.
func editorPath(env Env, p string) (string, error) {
	abs := filepath.Join(env.Workspace, filepath.FromSlash(p))
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		dir, derr := filepath.EvalSymlinks(filepath.Dir(abs))
		if derr != nil {
			return "", derr
		}
		real = filepath.Join(dir, filepath.Base(abs))
	}
	bases := []string{filepath.Clean(env.Workspace)}
	if r, err := filepath.EvalSymlinks(env.Workspace); err == nil && r != bases[0] {
		bases = append(bases, r)
	}
	if _, ok := insideWorkspace(bases, real); !ok {
		return "", errors.New("the path resolves out of the workspace")
	}
	return abs, nil
}

// editorRead asks the editor for p's text. It returns ok false with the
// reason when the editor cannot serve it (the caller reads the disk).
func editorRead(ctx context.Context, env Env, p string) (text string, why string, ok bool) {
	abs, err := editorPath(env, p)
	if err == nil {
		text, err = env.Editor.ReadTextFile(ctx, env.SessionID, env.ToolUseID, abs)
	}
	if err == nil && len(text) > MaxEditBytes {
		err = fmt.Errorf("the editor's text is %d bytes, over the limit of %d", len(text), MaxEditBytes)
	}
	if err != nil {
		return "", editorWhy(err), false
	}
	return text, "", true
}

// editorWrite asks the editor to put content in p. It returns the
// reason when the editor could not (the caller writes the disk).
func editorWrite(ctx context.Context, env Env, p, content string) (why string, ok bool) {
	abs, err := editorPath(env, p)
	if err == nil {
		err = env.Editor.WriteTextFile(ctx, env.SessionID, env.ToolUseID, abs, content)
	}
	if err != nil {
		return editorWhy(err), false
	}
	return "", true
}

// editorWhy is the reason a fallback gives.
func editorWhy(err error) string {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "the call was cancelled"
	}
	return err.Error()
}

// viaDisk marks a result served by the disk although an editor was
// attached, with the reason.
func viaDisk(res Result, why string) Result {
	res.Via = ViaDisk
	res.Summary += " (on disk: " + why + ")"
	return res
}

// viaEditor marks a result served by the editor.
func viaEditor(res Result) Result {
	res.Via = ViaEditor
	res.Summary += " (through the editor)"
	return res
}
