package tool

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// cleanPath validates a workspace-relative path. Absolute paths, NUL
// bytes and paths that climb out with ".." fail with permission_denied
// before the filesystem is touched; os.Root then refuses symlinks that
// lead out.
func cleanPath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.ContainsRune(p, 0) {
		return "", Errorf(ClassPermissionDenied, "path contains a NUL byte")
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return "", Errorf(ClassPermissionDenied, "path %q is absolute; paths are relative to the workspace", p)
	}
	c := filepath.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", Errorf(ClassPermissionDenied, "path %q leaves the workspace", p)
	}
	return c, nil
}

// fsError classifies an error from os.Root.
func fsError(op, p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Errorf(ClassNotFound, "%s %s: no such file or directory", op, p)
	case errors.Is(err, fs.ErrPermission):
		return Errorf(ClassPermissionDenied, "%s %s: permission denied", op, p)
	case isEscape(err):
		return Errorf(ClassPermissionDenied, "%s %s: path escapes the workspace", op, p)
	}
	return Errorf(ClassExecution, "%s %s: %v", op, p, err)
}

// isEscape recognises os.Root's refusal of a path leading outside.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// openNoBlock opens p in root with O_NONBLOCK, so that opening a FIFO
// (which the model can create with the shell tool) fails or returns at
// once instead of blocking until a peer opens the other end, which would
// hang the tool call beyond any cancellation. Callers check the file's
// type before using it; O_NONBLOCK has no effect on regular files and
// directories.
func openNoBlock(root *os.Root, p string, flag int) (*os.File, error) {
	return root.OpenFile(p, flag|syscall.O_NONBLOCK, 0o644)
}
