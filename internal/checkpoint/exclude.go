package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
)

// maxExcludeBytes bounds the workspace's .git/info/exclude read.
const maxExcludeBytes = 1 << 20

// syncExclude makes the git directory's info/exclude the workspace's
// own .git/info/exclude (when .git is a directory), so that a snapshot
// leaves out what the user's git ignores. The workspace's .gitignore
// files are read by git itself, at every depth of the work tree; the
// ignore files of a repository above the workspace, and the user's
// global excludes file, are not.
func (r *repo) syncExclude() error {
	data := []byte("# The workspace's .git/info/exclude, copied by metis before each snapshot.\n")
	if user, err := r.readUserExclude(); err != nil {
		return err
	} else if len(user) > 0 {
		data = append(append(data, user...), '\n')
	}
	return writeIfChanged(filepath.Join(r.g.dir, "info", "exclude"), data)
}

// readUserExclude reads <workspace>/.git/info/exclude if it is a
// regular file inside the workspace (nil if there is none).
func (r *repo) readUserExclude() ([]byte, error) {
	name := filepath.Join(".git", "info", "exclude")
	fi, err := r.lstat(".git/info/exclude", map[string]bool{})
	if err != nil || !fi.Mode().IsRegular() {
		return nil, nil
	}
	f, err := r.root.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, nil
		}
		return nil, fmt.Errorf("checkpoint: read %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxExcludeBytes))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", name, err)
	}
	return data, nil
}
