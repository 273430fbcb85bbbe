package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// needGit skips a test on a machine without git.
func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: checkpoints need it (scripts/setup.sh installs it)")
	}
}

// newStore opens a store under a temporary directory, with a
// workspace beside it.
func newStore(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	needGit(t)
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	opts.Dir = filepath.Join(base, "checkpoints")
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, ws
}

// write creates a file (and its directories) in the workspace.
func write(t testing.TB, ws, rel, content string) {
	t.Helper()
	p := filepath.Join(ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree describes every entry under dir but skip: a file as
// "file <mode> <sha256>", a symlink as "link <target>", a directory as
// "dir". The permission bits of files are reduced to the executable
// bit, which is what a checkpoint records.
func tree(t testing.TB, dir string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			mode := "644"
			if fi.Mode()&0o100 != 0 {
				mode = "755"
			}
			out[rel] = "file " + mode + " " + hex.EncodeToString(sum[:8])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diffTrees describes how two trees differ ("" if they do not).
func diffTrees(want, got map[string]string) string {
	var lines []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			lines = append(lines, "missing "+p+" ("+w+")")
		} else if g != w {
			lines = append(lines, "differs "+p+": want "+w+", got "+g)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			lines = append(lines, "extra "+p+" ("+g+")")
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
