package checkpointtest_test

import (
	"flag"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// Paths of the random edits: a small set, so that edits collide.
var (
	dirs  = []string{"", "d1", "d2", "d1/d3"}
	files = []string{"f1", "f2", "f3.log", "x.sh"}
)

// randomEdit is one turn's prompt for builtin:demo: a tool call that
// creates, modifies, deletes, chmods, renames or symlinks a file, in a
// nested directory or not, ignored (*.log) or not. Deletions and
// renames remove the directories they leave empty, as a user's rm and
// rmdir would (a checkpoint holds files, not empty directories).
func randomEdit(t *rapid.T) string {
	p := path.Join(rapid.SampledFrom(dirs).Draw(t, "dir"), rapid.SampledFrom(files).Draw(t, "file"))
	content := rapid.StringMatching(`[a-z ]{0,30}`).Draw(t, "content") + "\n"
	parent := path.Dir(p)
	switch rapid.IntRange(0, 7).Draw(t, "op") {
	case 0: // write_file (the directory must exist)
		if parent == "." {
			return toolCmd("write_file", map[string]string{"path": p, "content": content})
		}
		fallthrough
	case 1: // create or overwrite through the shell, with the directories
		return shell("mkdir -p " + parent + " && test ! -d " + p + " && rm -f " + p + " && printf '%s' '" + content + "' > " + p)
	case 2: // delete
		return shell("test -f " + p + " -o -L " + p + " && rm -f " + p + " && rmdir -p " + parent + " 2>/dev/null")
	case 3: // chmod
		return shell("test -f " + p + " -a ! -L " + p + " && { if test -x " + p + "; then chmod -x " + p + "; else chmod +x " + p + "; fi; }")
	case 4: // rename
		to := path.Join(rapid.SampledFrom(dirs).Draw(t, "to_dir"), rapid.SampledFrom(files).Draw(t, "to_file"))
		return shell("test -f " + p + " -a ! -d " + to + " && mkdir -p " + path.Dir(to) + " && mv -f " + p + " " + to +
			" && rmdir -p " + parent + " 2>/dev/null")
	case 5: // symlink
		return shell("mkdir -p " + parent + " && test ! -d " + p + " && ln -sfn " + rapid.SampledFrom(files).Draw(t, "target") + " " + p)
	case 6: // apply_patch adding a file (fails when it exists: a turn that changes nothing)
		return toolCmd("apply_patch", map[string]string{"patch": "*** Begin Patch\n*** Add File: " + p + "\n+" + content + "*** End Patch\n"})
	default: // edit_file on a file that may not hold the text
		return toolCmd("edit_file", map[string]any{"path": p, "old_string": "a", "new_string": "b", "replace_all": true})
	}
}

func shell(cmd string) string {
	return toolCmd("shell", map[string]string{"command": "cd . && { " + cmd + "; } ; true"})
}

// TestRevertAfterTwentyTurnsThroughTheTools: a session runs 20 turns,
// each a random edit made by a real tool (write_file, edit_file,
// apply_patch, the shell) through the real server; reverting any of those turns gives
// back exactly the files as they were before it (the ignored ones
// aside, which a revert leaves alone), and undoing the revert gives
// back the files as they were after the last turn.
func TestRevertAfterTwentyTurnsThroughTheTools(t *testing.T) {
	needGit(t)
	fewChecks(t, 4)
	var turnsRun, changed int
	rapid.Check(t, func(rt *rapid.T) {
		h := servertest.Start(t, "")
		if err := os.WriteFile(filepath.Join(h.Workspace, ".gitignore"), []byte("*.log\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sid := h.CreateSession()
		const n = 20
		var ids []string
		var trees []map[string]string
		for range n {
			trees = append(trees, tree(t, h.Workspace))
			ids = append(ids, h.Submit(sid, randomEdit(rt)))
			h.WaitTurn(sid)
		}
		last := tree(t, h.Workspace)
		for _, tu := range turns(t, h.URL, sid).Turns {
			turnsRun++
			if tu.Changes != nil && tu.Changes.FilesChanged > 0 {
				changed++
			}
		}
		k := rapid.IntRange(0, n-1).Draw(rt, "revert")
		var res protocol.RevertResult
		var e protocol.HTTPError
		switch st := h.Do("POST", "/sessions/"+sid+"/turns/"+ids[k]+"/revert", nil, &res); {
		case st == http.StatusConflict:
			h.Do("POST", "/sessions/"+sid+"/turns/"+ids[k]+"/revert", nil, &e)
			if e.Error.Code != protocol.CodeNothingToRevert || treeDiff(trees[k], last) != "" {
				rt.Fatalf("revert of turn %d: %s; the files changed since:\n%s", k, e.Error.Message, treeDiff(trees[k], last))
			}
			return
		case st != http.StatusAccepted:
			rt.Fatalf("revert of turn %d: %d", k, st)
		}
		if d := treeDiff(trees[k], tree(t, h.Workspace)); d != "" {
			rt.Fatalf("after reverting turn %d the files differ from before it:\n%s\nrevert: %+v", k, d, res)
		}
		if st := h.Do("POST", "/sessions/"+sid+"/checkpoints/"+res.UndoCheckpointID+"/restore", nil, nil); st != http.StatusAccepted {
			rt.Fatalf("undo: %d", st)
		}
		if d := treeDiff(last, tree(t, h.Workspace)); d != "" {
			rt.Fatalf("after undoing the revert the files differ from after the last turn:\n%s", d)
		}
		h.Stop()
	})
	// The edits must mostly land, or the property says little.
	t.Logf("%d of %d turns changed files", changed, turnsRun)
	if changed*4 < turnsRun {
		t.Fatalf("only %d of %d turns changed files", changed, turnsRun)
	}
}

// fewChecks sets rapid's number of checks to n for one test (a check
// here is a server running 20 turns), unless -rapid.checks was given.
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
