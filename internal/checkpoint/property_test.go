package checkpoint

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// Edits of the property tests: paths from a small set so that edits
// collide (the same file changed twice, a file where a directory was).
var (
	propDirs  = []string{"", "d1", "d2", "d1/d3"}
	propFiles = []string{"f1", "f2", "f3.log", "x.sh"}
)

// edit applies one random edit to ws; ignored files (*.log) change too.
func edit(t *rapid.T, ws string) {
	p := filepath.Join(rapid.SampledFrom(propDirs).Draw(t, "dir"), rapid.SampledFrom(propFiles).Draw(t, "file"))
	full := filepath.Join(ws, p)
	switch rapid.IntRange(0, 5).Draw(t, "op") {
	case 0, 1: // create or modify
		if mkParents(ws, p) != nil {
			return
		}
		if fi, err := os.Lstat(full); err == nil && fi.IsDir() {
			return
		}
		_ = os.WriteFile(full, []byte(rapid.StringMatching(`[a-z\n]{0,40}`).Draw(t, "content")), 0o644)
	case 2: // delete
		if fi, err := os.Lstat(full); err == nil && !fi.IsDir() {
			_ = os.Remove(full)
			rmEmptyParents(ws, p)
		}
	case 3: // chmod
		if fi, err := os.Lstat(full); err == nil && fi.Mode().IsRegular() {
			_ = os.Chmod(full, fi.Mode().Perm()^0o111)
		}
	case 4: // rename
		to := filepath.Join(rapid.SampledFrom(propDirs).Draw(t, "to_dir"), rapid.SampledFrom(propFiles).Draw(t, "to_file"))
		fi, err := os.Lstat(full)
		if err != nil || fi.IsDir() || mkParents(ws, to) != nil {
			return
		}
		if ti, err := os.Lstat(filepath.Join(ws, to)); err == nil && ti.IsDir() {
			return
		}
		if os.Rename(full, filepath.Join(ws, to)) == nil {
			rmEmptyParents(ws, p)
		}
	case 5: // symlink
		if mkParents(ws, p) != nil {
			return
		}
		if fi, err := os.Lstat(full); err == nil {
			if fi.IsDir() {
				return
			}
			_ = os.Remove(full)
		}
		_ = os.Symlink(rapid.SampledFrom(propFiles).Draw(t, "target"), full)
	}
}

// mkParents makes p's directories, failing where a file is in the way.
func mkParents(ws, p string) error {
	return os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755)
}

// rmEmptyParents removes the directories a deletion left empty, as a
// user's `rm` followed by `rmdir` would (an empty directory is not a
// file a checkpoint holds).
func rmEmptyParents(ws, p string) {
	for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
		if os.Remove(filepath.Join(ws, d)) != nil {
			return
		}
	}
}

// visible is the tree without the ignored files, which a restore
// leaves alone, and without the directories holding nothing else.
func visible(t testing.TB, ws string) map[string]string {
	tr := tree(t, ws)
	for p := range tr {
		if strings.HasSuffix(p, ".log") {
			delete(tr, p)
		}
	}
	used := map[string]bool{}
	for p, d := range tr {
		if d == "dir" {
			continue
		}
		for dir := filepath.Dir(p); dir != "."; dir = filepath.Dir(dir) {
			used[dir] = true
		}
	}
	for p, d := range tr {
		if d == "dir" && !used[p] {
			delete(tr, p)
		}
	}
	return tr
}

// fewChecks sets rapid's number of checks to n for one test (each
// check here is a workspace going through 20 turns, about half a
// second), unless -rapid.checks was given.
func fewChecks(t *testing.T, n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	f := flag.Lookup("rapid.checks")
	if given || f == nil {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// TestRestoreAfterManyTurnsIsByteIdentical: the workspace goes through
// 20 turns of random edits, each after a checkpoint; restoring the
// checkpoint of any turn gives back exactly the files as they were
// before it (ignored files aside), and undoing the restore gives back
// the files as they were after the last turn.
func TestRestoreAfterManyTurnsIsByteIdentical(t *testing.T) {
	needGit(t)
	fewChecks(t, 20)
	rapid.Check(t, func(rt *rapid.T) {
		s, ws := newStore(t, Options{})
		write(t, ws, ".gitignore", "*.log\n")
		const turns = 20
		var ids []string
		var trees []map[string]string
		for range turns {
			trees = append(trees, visible(t, ws))
			ids = append(ids, snap(t, s, ws).ID)
			for range rapid.IntRange(0, 4).Draw(rt, "edits") {
				edit(rt, ws)
			}
		}
		last := visible(t, ws)
		// Three reverts per workspace, each undone.
		for range 3 {
			k := rapid.IntRange(0, turns-1).Draw(rt, "revert")
			res, err := s.Restore(bg, ws, ids[k])
			if errors.Is(err, ErrNothingToRestore) && diffTrees(trees[k], last) == "" {
				continue // nothing changed since turn k
			}
			if err != nil {
				rt.Fatalf("restore of turn %d: %v", k, err)
			}
			if d := diffTrees(trees[k], visible(t, ws)); d != "" {
				rt.Fatalf("after restoring turn %d the files differ:\n%s\nfailed: %+v", k, d, res.Failed)
			}
			if _, err := s.Restore(bg, ws, res.Undo.ID); err != nil && !(errors.Is(err, ErrNothingToRestore) && diffTrees(trees[k], last) == "") {
				rt.Fatalf("undo: %v", err)
			}
			if d := diffTrees(last, visible(t, ws)); d != "" {
				rt.Fatalf("after undoing the restore of turn %d the files differ:\n%s", k, d)
			}
		}
	})
}
