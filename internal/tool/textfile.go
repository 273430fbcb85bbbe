package tool

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Shared by the tools that change files in place (edit_file,
// apply_patch): resolving the file a path names, reading it whole, and
// replacing it atomically through the workspace's os.Root.

// MaxEditBytes is the largest file edit_file and apply_patch change, and
// the largest content they produce.
const MaxEditBytes = MaxWriteBytes

// resolveFile returns the workspace-relative path of the file p names,
// following symbolic links at its last component while they stay inside
// the workspace, so that an edit through a link changes the file it
// points to instead of replacing the link. (Links in the directories of
// the path are os.Root's to follow.) A link leading out of the
// workspace is permission_denied, too many links invalid_input.
func resolveFile(env Env, p, display string) (string, error) {
	p = resolvePath(env, p)
	bases := []string{filepath.Clean(env.Workspace)}
	if real, err := filepath.EvalSymlinks(env.Workspace); err == nil && real != bases[0] {
		bases = append(bases, real)
	}
	for range maxLinkHops {
		fi, err := env.Root.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil // the operation reports a missing file
		}
		target, err := env.Root.Readlink(p)
		if err != nil {
			return "", fsError("resolve", display, err)
		}
		var next string
		if filepath.IsAbs(target) {
			rel, ok := insideWorkspace(bases, filepath.Clean(target))
			if !ok || env.Workspace == "" {
				return "", Errorf(ClassPermissionDenied, "%s: the symbolic link leads out of the workspace", display)
			}
			next = rel
		} else {
			next = path.Join(path.Dir(p), filepath.ToSlash(target))
			if next == ".." || strings.HasPrefix(next, "../") {
				return "", Errorf(ClassPermissionDenied, "%s: the symbolic link leads out of the workspace", display)
			}
		}
		p = resolvePath(env, next)
	}
	return "", Errorf(ClassInvalidInput, "%s: too many levels of symbolic links", display)
}

// readTextFile reads the regular file p (already resolved) whole for an
// edit: a directory, a special file, a file with other hard links or
// one larger than MaxEditBytes is refused.
func readTextFile(env Env, p, display string) ([]byte, os.FileInfo, error) {
	f, err := openNoBlock(env.Root, p, os.O_RDONLY)
	if err != nil {
		return nil, nil, fsError("read", display, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fsError("read", display, err)
	}
	if st.IsDir() {
		return nil, nil, Errorf(ClassInvalidInput, "%s is a directory", display)
	}
	if !st.Mode().IsRegular() {
		return nil, nil, Errorf(ClassInvalidInput, "%s is not a regular file", display)
	}
	if err := refuseHardLinked(f, display); err != nil {
		return nil, nil, err
	}
	if st.Size() > MaxEditBytes {
		return nil, nil, Errorf(ClassInvalidInput, "%s is %d bytes; files are edited up to %d bytes (use the shell for larger ones)", display, st.Size(), MaxEditBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxEditBytes+1))
	if err != nil {
		return nil, nil, fsError("read", display, err)
	}
	if len(b) > MaxEditBytes {
		return nil, nil, Errorf(ClassInvalidInput, "%s grew past %d bytes while being read", display, MaxEditBytes)
	}
	return b, st, nil
}

// sameFile reports whether p still is the file st described (same
// inode, size and modification time): an edit checks this just before
// it replaces the file, so that a change made meanwhile is not lost.
func sameFile(env Env, p string, st os.FileInfo) bool {
	now, err := env.Root.Stat(p)
	return err == nil && os.SameFile(now, st) && now.Size() == st.Size() && now.ModTime().Equal(st.ModTime())
}

// writeTemp writes data to a new temporary file in the directory of p
// and returns its workspace-relative name. The file gets the mode of
// old (the file it will replace; nil for a new file: 0644 less the
// umask), and its owner when the server runs as root.
func writeTemp(env Env, p string, data []byte, old os.FileInfo) (string, error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	base := path.Base(p)
	if len(base) > 100 {
		base = base[:100]
	}
	tmp := path.Join(path.Dir(p), ".metis-"+base+"-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := env.Root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		f.Close()
		_ = env.Root.Remove(tmp)
		return "", err
	}
	if old != nil {
		if err := f.Chmod(old.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
			return fail(err)
		}
		if sys, ok := old.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
			_ = f.Chown(int(sys.Uid), int(sys.Gid))
		}
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = env.Root.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// replaceFile replaces p with data atomically: a temporary file in the
// same directory, renamed over p, so that a reader sees the old content
// or the new, never a part. old is p's current state (nil if p is new).
func replaceFile(env Env, p string, data []byte, old os.FileInfo) error {
	tmp, err := writeTemp(env, p, data, old)
	if err != nil {
		return err
	}
	if err := env.Root.Rename(tmp, p); err != nil {
		_ = env.Root.Remove(tmp)
		return err
	}
	return nil
}

// errChanged reports a file changed by someone else during an edit.
var errChanged = errors.New("the file changed while it was being edited; read it again and retry")
