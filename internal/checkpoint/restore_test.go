package checkpoint

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var bg = context.Background()

func snap(t testing.TB, s *Store, ws string) Checkpoint {
	t.Helper()
	cp, err := s.Snapshot(bg, ws, KindTurn)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func restore(t testing.TB, s *Store, ws, id string) Restored {
	t.Helper()
	res, err := s.Restore(bg, ws, id)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRestorePutsBackModifiedDeletedCreatedAndModes(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, "a.txt", "alpha\n")
	write(t, ws, "dir/sub/b.txt", "beta\n")
	write(t, ws, "run.sh", "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(ws, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	before := tree(t, ws)
	cp := snap(t, s, ws)

	write(t, ws, "a.txt", "changed\n")
	os.Remove(filepath.Join(ws, "dir/sub/b.txt"))
	write(t, ws, "new/deep/c.txt", "created\n")
	os.Chmod(filepath.Join(ws, "run.sh"), 0o644)
	os.Remove(filepath.Join(ws, "link"))
	os.Symlink("run.sh", filepath.Join(ws, "link"))

	res := restore(t, s, ws, cp.ID)
	if d := diffTrees(before, tree(t, ws)); d != "" {
		t.Fatalf("the tree after the restore differs:\n%s", d)
	}
	if strings.Join(res.Removed, ",") != "new/deep/c.txt" {
		t.Errorf("Removed = %v, want the created file", res.Removed)
	}
	if strings.Join(res.Restored, ",") != "a.txt,dir/sub/b.txt,link,run.sh" {
		t.Errorf("Restored = %v", res.Restored)
	}
	if res.Undo.ID == "" || len(res.Failed) != 0 {
		t.Errorf("Undo = %q, Failed = %v", res.Undo.ID, res.Failed)
	}
}

func TestRestoreCanBeUndone(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, "a.txt", "one\n")
	cp := snap(t, s, ws)
	write(t, ws, "a.txt", "two\n")
	write(t, ws, "b.txt", "new\n")
	after := tree(t, ws)
	res := restore(t, s, ws, cp.ID)
	restore(t, s, ws, res.Undo.ID)
	if d := diffTrees(after, tree(t, ws)); d != "" {
		t.Fatalf("undoing the restore did not bring the files back:\n%s", d)
	}
}

func TestRestoreOfUnchangedFilesIsNothingToRestore(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, "a.txt", "one\n")
	cp := snap(t, s, ws)
	_, err := s.Restore(bg, ws, cp.ID)
	if !errors.Is(err, ErrNothingToRestore) {
		t.Fatalf("Restore of an unchanged workspace = %v, want ErrNothingToRestore", err)
	}
	refs, _ := s.Refs(bg, ws)
	if len(refs) != 1 {
		t.Errorf("refs after a restore that did nothing = %v, want the one checkpoint", refs)
	}
}

func TestRestoreLeavesIgnoredLargeAndUncapturedFilesAlone(t *testing.T) {
	s, ws := newStore(t, Options{MaxFileBytes: 100})
	write(t, ws, ".gitignore", "*.log\nbuild/\n")
	write(t, ws, "keep.log", "old log\n")
	write(t, ws, "big.bin", strings.Repeat("x", 200))
	write(t, ws, "src/a.go", "package a\n")
	cp := snap(t, s, ws)
	if len(cp.Skipped) != 1 || cp.Skipped[0].Path != "big.bin" || cp.Skipped[0].Reason != SkipTooLarge {
		t.Fatalf("Skipped = %+v, want big.bin too_large", cp.Skipped)
	}
	// The turn: new ignored files, a log rewritten, the big file
	// shrunk below the limit (so the next snapshot captures it), a new
	// file.
	write(t, ws, "build/out.o", "object\n")
	write(t, ws, "keep.log", "new log\n")
	write(t, ws, "big.bin", "small now\n")
	write(t, ws, "src/b.go", "package a\n")
	res := restore(t, s, ws, cp.ID)
	for _, p := range []string{"build/out.o", "keep.log", "big.bin"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%s was not left alone: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "src/b.go")); !os.IsNotExist(err) {
		t.Errorf("src/b.go created after the checkpoint still exists (%v)", err)
	}
	found := false
	for _, l := range res.LeftAlone {
		found = found || l.Path == "big.bin" && l.Reason == SkipTooLarge
	}
	if !found {
		t.Errorf("LeftAlone = %+v, want big.bin (too_large at the checkpoint)", res.LeftAlone)
	}
}

func TestRestoreUsesTheCheckpointsIgnoreRules(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, ".gitignore", "*.tmp\n")
	write(t, ws, "cache.tmp", "existed, ignored\n")
	cp := snap(t, s, ws)
	// The turn stops ignoring *.tmp: the next snapshot captures
	// cache.tmp, which the checkpoint could not hold.
	write(t, ws, ".gitignore", "# nothing\n")
	write(t, ws, "new.tmp", "created by the turn\n")
	res := restore(t, s, ws, cp.ID)
	if data, err := os.ReadFile(filepath.Join(ws, "cache.tmp")); err != nil || string(data) != "existed, ignored\n" {
		t.Fatalf("cache.tmp, ignored at the checkpoint, was touched: %q %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.tmp")); err != nil {
		t.Fatalf("new.tmp is ignored by the checkpoint's rules and must be left alone: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, ".gitignore")); string(data) != "*.tmp\n" {
		t.Errorf(".gitignore = %q, want the checkpoint's", data)
	}
	if len(res.Removed) != 0 {
		t.Errorf("Removed = %v, want nothing", res.Removed)
	}
}

func TestRestoreNeverWritesThroughASymlink(t *testing.T) {
	s, ws := newStore(t, Options{})
	outside := t.TempDir()
	write(t, ws, "a/b/f", "inside\n")
	cp := snap(t, s, ws)
	// The turn replaces the directory with a symlink out of the
	// workspace.
	if err := os.RemoveAll(filepath.Join(ws, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "a")); err != nil {
		t.Fatal(err)
	}
	write(t, outside, "b/f", "outside\n")
	restore(t, s, ws, cp.ID)
	if data, _ := os.ReadFile(filepath.Join(outside, "b/f")); string(data) != "outside\n" {
		t.Fatalf("a file outside the workspace was written: %q", data)
	}
	fi, err := os.Lstat(filepath.Join(ws, "a"))
	if err != nil || !fi.IsDir() {
		t.Fatalf("a is not a directory again: %v %v", fi, err)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "a/b/f")); string(data) != "inside\n" {
		t.Fatalf("a/b/f = %q", data)
	}
}

func TestRestoreDoesNotClearADirectoryInTheWay(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, ".gitignore", "*.o\n")
	write(t, ws, "x", "a file\n")
	cp := snap(t, s, ws)
	// The turn turns x into a directory holding an ignored file.
	os.Remove(filepath.Join(ws, "x"))
	write(t, ws, "x/obj.o", "ignored\n")
	res := restore(t, s, ws, cp.ID)
	if _, err := os.Stat(filepath.Join(ws, "x/obj.o")); err != nil {
		t.Fatalf("the ignored file in the way was removed: %v", err)
	}
	if len(res.Failed) != 1 || res.Failed[0].Path != "x" {
		t.Fatalf("Failed = %+v, want x", res.Failed)
	}
}

func TestCheckpointsNeverTouchTheUsersGit(t *testing.T) {
	s, ws := newStore(t, Options{})
	gitIn(t, ws, "init", "-q")
	write(t, ws, "tracked.txt", "v1\n")
	gitIn(t, ws, "add", "tracked.txt")
	gitIn(t, ws, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", "one")
	write(t, ws, ".git/info/exclude", "secret.env\n")
	write(t, ws, "secret.env", "KEY=1\n")
	userGit := tree(t, filepath.Join(ws, ".git"))

	cp := snap(t, s, ws)
	write(t, ws, "tracked.txt", "v2\n")
	write(t, ws, "other.txt", "new\n")
	restore(t, s, ws, cp.ID)
	if d := diffTrees(userGit, tree(t, filepath.Join(ws, ".git"))); d != "" {
		t.Fatalf("the user's .git changed:\n%s", d)
	}
	out, err := exec.Command("git", "--git-dir", s.Dir(ws), "ls-tree", "-r", "--name-only", "refs/metis/"+cp.ID).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "secret.env") || strings.Contains(string(out), ".git/") {
		t.Fatalf("the checkpoint holds %q: the user's info/exclude or .git were not left out", out)
	}
}

func TestCheckpointsKeepBytesWhateverTheAttributesAndEnvironment(t *testing.T) {
	s, ws := newStore(t, Options{})
	// A hostile environment for git: none of it may reach it.
	t.Setenv("GIT_DIR", filepath.Join(ws, "nope"))
	t.Setenv("GIT_INDEX_FILE", filepath.Join(ws, "nope-index"))
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.autocrlf'='true'")
	write(t, ws, ".gitattributes", "* text eol=crlf filter=evil ident\n")
	write(t, ws, "lf.txt", "line one\nline two $Id$\n")
	write(t, ws, "crlf.txt", "dos\r\nline\r\n")
	want := tree(t, ws)
	cp := snap(t, s, ws)
	write(t, ws, "lf.txt", "changed\n")
	write(t, ws, "crlf.txt", "changed\n")
	restore(t, s, ws, cp.ID)
	if d := diffTrees(want, tree(t, ws)); d != "" {
		t.Fatalf("bytes changed through the restore:\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(ws, "nope-index")); !os.IsNotExist(err) {
		t.Fatal("git used GIT_INDEX_FILE from the environment")
	}
}

func TestSnapshotLeavesNestedRepositoriesAndSpecialFilesOut(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, "a.txt", "a\n")
	sub := filepath.Join(ws, "vendor/lib")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, sub, "init", "-q")
	write(t, sub, "lib.go", "package lib\n")
	cp := snap(t, s, ws)
	if len(cp.Skipped) != 1 || cp.Skipped[0].Path != "vendor/lib" || cp.Skipped[0].Reason != SkipNestedRepository {
		t.Fatalf("Skipped = %+v", cp.Skipped)
	}
	write(t, sub, "lib.go", "package lib // changed\n")
	write(t, ws, "a.txt", "b\n")
	res := restore(t, s, ws, cp.ID)
	if data, _ := os.ReadFile(filepath.Join(sub, "lib.go")); !strings.Contains(string(data), "changed") {
		t.Fatal("a restore touched a nested repository")
	}
	if len(res.Restored) != 1 {
		t.Errorf("Restored = %v", res.Restored)
	}
}

func TestSnapshotPastTheCapLeavesTheBiggestNewDirectoriesOut(t *testing.T) {
	s, ws := newStore(t, Options{MaxNewFiles: 10})
	for i := range 8 {
		write(t, ws, filepath.Join("node_modules", "m", string(rune('a'+i))), "x")
	}
	for i := range 4 {
		write(t, ws, filepath.Join("src", string(rune('a'+i))), "x")
	}
	write(t, ws, "top.txt", "x")
	cp := snap(t, s, ws)
	if len(cp.Skipped) != 1 || cp.Skipped[0].Path != "node_modules" || cp.Skipped[0].Files != 8 {
		t.Fatalf("Skipped = %+v, want node_modules with 8 files", cp.Skipped)
	}
	// The next turn deletes a source file and creates one in the
	// directory left out: the restore brings the first back and leaves
	// the directory it never captured alone.
	os.Remove(filepath.Join(ws, "src/a"))
	write(t, ws, "node_modules/m/new", "x")
	res := restore(t, s, ws, cp.ID)
	if _, err := os.Stat(filepath.Join(ws, "src/a")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "node_modules/m/new")); err != nil {
		t.Fatalf("a file in a directory the checkpoint left out was removed (%v); left alone: %+v", err, res.LeftAlone)
	}
}

func TestASnapshotOfAnUnchangedWorkspaceStagesNothing(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, "a.txt", "a\n")
	first := snap(t, s, ws)
	second := snap(t, s, ws)
	if first.Staged != 1 || second.Staged != 0 {
		t.Fatalf("Staged = %d then %d, want 1 then 0", first.Staged, second.Staged)
	}
	cs, err := s.Changes(bg, ws, first.ID, second.ID)
	if err != nil || len(cs) != 0 {
		t.Fatalf("Changes = %v, %v", cs, err)
	}
}

func TestALockLeftByAKilledGitIsCleared(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, "a.txt", "a\n")
	snap(t, s, ws)
	if err := os.WriteFile(filepath.Join(s.Dir(ws), "index.lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "a.txt", "b\n")
	if cp := snap(t, s, ws); cp.Staged != 1 {
		t.Fatalf("Staged = %d after a stale index.lock", cp.Staged)
	}
}

func TestChangesAndDiffs(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, "a.txt", "one\ntwo\n")
	write(t, ws, "gone.txt", "bye\n")
	write(t, ws, "bin", "\x00\x01")
	from := snap(t, s, ws)
	write(t, ws, "a.txt", "one\nTWO\nthree\n")
	os.Remove(filepath.Join(ws, "gone.txt"))
	write(t, ws, "bin", "\x00\x02")
	write(t, ws, "new.txt", "hello\n")
	to := snap(t, s, ws)
	cs, err := s.Changes(bg, ws, from.ID, to.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, c := range cs {
		got += c.Path + ":" + c.Status + ":" + itoa(c.Additions) + "/" + itoa(c.Deletions)
		if c.Binary {
			got += ":binary"
		}
		got += " "
	}
	if want := "a.txt:modified:2/1 bin:modified:0/0:binary gone.txt:deleted:0/1 new.txt:added:1/0 "; got != want {
		t.Fatalf("Changes = %q, want %q", got, want)
	}
	ds, err := s.Diffs(bg, ws, from.ID, to.ID, 1<<10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 4 || !strings.Contains(ds[0].Diff, "+TWO") || !strings.Contains(ds[3].Diff, "+hello") ||
		strings.Contains(ds[0].Diff, "hello") {
		t.Fatalf("Diffs = %+v", ds)
	}
	cut, err := s.Diffs(bg, ws, from.ID, to.ID, 1<<10, 120)
	if err != nil || !cut[len(cut)-1].Truncated {
		t.Fatalf("a diff past maxTotal is not marked truncated: %+v %v", cut, err)
	}
}

func TestGCRemovesWhatKeepRefusesAndEmptyDirectories(t *testing.T) {
	s, ws := newStore(t, Options{})
	write(t, ws, "a.txt", "a\n")
	a := snap(t, s, ws)
	write(t, ws, "a.txt", "b\n")
	b := snap(t, s, ws)
	st, err := s.GC(bg, func(_ string, r Ref) bool { return r.ID == b.ID })
	if err != nil {
		t.Fatal(err)
	}
	if st.Removed != 1 || st.Kept != 1 {
		t.Fatalf("GC = %+v", st)
	}
	if ok, _ := s.Exists(bg, ws, a.ID); ok {
		t.Fatal("the refused checkpoint still exists")
	}
	if ok, _ := s.Exists(bg, ws, b.ID); !ok {
		t.Fatal("the kept checkpoint is gone")
	}
	st, err = s.GC(bg, func(string, Ref) bool { return false })
	if err != nil || st.DirsRemoved != 1 {
		t.Fatalf("GC of everything = %+v, %v", st, err)
	}
	if _, err := os.Stat(s.Dir(ws)); !os.IsNotExist(err) {
		t.Fatal("the empty git directory is still there")
	}
}

func TestCollapseKeepsSkipsBounded(t *testing.T) {
	var skips []Skip
	for _, d := range []string{"a", "b"} {
		for i := range 5 {
			skips = append(skips, Skip{Path: d + "/x/" + itoa(i), Reason: SkipTooLarge})
		}
	}
	got := collapse(skips, 3)
	if len(got) != 2 || got[0].Path != "a/x" || got[1].Path != "b/x" || got[0].Files != 5 {
		t.Fatalf("collapse = %+v", got)
	}
	if got := collapse([]Skip{{Path: "a"}, {Path: "b"}, {Path: "c"}}, 2); len(got) != 1 || got[0].Path != "." {
		t.Fatalf("collapse of top-level paths = %+v, want the whole workspace", got)
	}
	if got := dedupeUnder([]Skip{{Path: "a"}, {Path: "a.txt"}, {Path: "a/b"}}); len(got) != 2 {
		t.Fatalf("dedupeUnder = %+v", got)
	}
}

func TestOpenWithoutGitSaysWhatToInstall(t *testing.T) {
	_, err := Open(bg, Options{Dir: t.TempDir(), Git: "/nonexistent/git"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "install git") {
		t.Fatalf("Open without git = %v", err)
	}
}

func gitIn(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
