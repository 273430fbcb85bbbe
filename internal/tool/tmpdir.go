package tool

import (
	"io/fs"
	"os"
	"path/filepath"
)

// removeTree removes a call's temporary directory and everything the
// command left in it. A command may have left directories it cannot
// read or enter (chmod 000), which os.RemoveAll cannot empty: they are
// opened up (never following a symlink) and the removal tried again.
func removeTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	// WalkDir calls the function for a directory before it reads it.
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
