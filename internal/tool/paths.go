package tool

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Path length limits (Linux's NAME_MAX and PATH_MAX): longer names fail
// with invalid_input before the filesystem is asked.
const (
	maxNameBytes = 255
	maxPathBytes = 4095
)

// cleanPath validates a workspace-relative path. Absolute paths, NUL
// bytes and paths that climb out with ".." fail with permission_denied
// before the filesystem is touched; os.Root then refuses symlinks that
// lead out. A path or a name in it too long for the filesystem fails
// with invalid_input.
func cleanPath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.ContainsRune(p, 0) {
		return "", Errorf(ClassPermissionDenied, "path contains a NUL byte")
	}
	if len(p) > maxPathBytes {
		return "", Errorf(ClassInvalidInput, "path is %d bytes long; the limit is %d", len(p), maxPathBytes)
	}
	for _, name := range strings.Split(p, "/") {
		if len(name) > maxNameBytes {
			return "", Errorf(ClassInvalidInput, "a name in the path is %d bytes long; the limit is %d", len(name), maxNameBytes)
		}
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
	case errors.Is(err, syscall.ENAMETOOLONG):
		return Errorf(ClassInvalidInput, "%s %s: file name too long", op, p)
	case errors.Is(err, syscall.ENOTDIR):
		return Errorf(ClassNotFound, "%s %s: a part of the path is not a directory", op, p)
	case errors.Is(err, syscall.ELOOP):
		return Errorf(ClassInvalidInput, "%s %s: too many levels of symbolic links", op, p)
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

// maxLinkHops bounds how many absolute symlinks resolvePath follows.
const maxLinkHops = 40

// resolvePath rewrites the absolute symlinks met along the cleaned path
// p that point inside the workspace (given by the workspace's absolute
// path, or the path with its own symlinks resolved) into
// workspace-relative paths, so "ln -s /abs/workspace/data link" works
// like "ln -s data link". os.Root refuses every absolute symlink; this
// only ever produces a workspace-relative path, which os.Root then
// resolves with its own checks, so it cannot widen confinement: an
// absolute symlink pointing outside is left as it is and refused, and a
// symlink changed between this walk and the open is refused by os.Root
// too. Any error during the walk leaves the path as it is, for the
// operation itself to report.
func resolvePath(env Env, p string) string {
	if env.Workspace == "" || p == "." {
		return p
	}
	bases := []string{filepath.Clean(env.Workspace)}
	if real, err := filepath.EvalSymlinks(env.Workspace); err == nil && real != bases[0] {
		bases = append(bases, real)
	}
	for hop := 0; hop < maxLinkHops; hop++ {
		parts := strings.Split(p, "/")
		rewritten := false
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			fi, err := env.Root.Lstat(prefix)
			if err != nil {
				return p
			}
			if fi.Mode()&fs.ModeSymlink == 0 {
				continue
			}
			target, err := env.Root.Readlink(prefix)
			if err != nil || !filepath.IsAbs(target) {
				continue // relative symlinks are os.Root's to follow
			}
			rel, ok := insideWorkspace(bases, filepath.Clean(target))
			if !ok {
				return p // leads out: os.Root refuses it
			}
			p = strings.Join(append([]string{rel}, parts[i+1:]...), "/")
			rewritten = true
			break
		}
		if !rewritten {
			return p
		}
	}
	return p
}

// insideWorkspace returns target relative to the first base it lies in.
func insideWorkspace(bases []string, target string) (string, bool) {
	for _, b := range bases {
		if target == b {
			return ".", true
		}
		if strings.HasPrefix(target, b+"/") {
			return target[len(b)+1:], true
		}
	}
	return "", false
}
