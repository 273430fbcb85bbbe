package tool

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestApplyPatchRollsBackAFailureDuringWrites: when a step of the
// commit fails after others were done, the files already written are
// restored, the files already added removed, and no temporary file or
// new directory is left.
func TestApplyPatchRollsBackAFailureDuringWrites(t *testing.T) {
	for failAt := 0; failAt < 4; failAt++ { // the patch has 4 steps
		ws := t.TempDir()
		for p, c := range map[string]string{"m.txt": "m1\nm2\n", "d.txt": "delete me\n", "from.txt": "move me\n", "to.txt": "overwritten\n"} {
			if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o640); err != nil {
				t.Fatal(err)
			}
		}
		root, err := os.OpenRoot(ws)
		if err != nil {
			t.Fatal(err)
		}
		env := Env{Root: root, Workspace: ws}
		patchStepHook = func(step int) error {
			if step == failAt {
				return errors.New("injected failure")
			}
			return nil
		}
		in, _ := json.Marshal(map[string]string{"patch": "*** Begin Patch\n*** Add File: new/dir/n.txt\n+n\n*** Update File: m.txt\n@@\n-m2\n+M2\n*** Delete File: d.txt\n*** Update File: from.txt\n*** Move to: to.txt\n@@\n-move me\n+moved\n*** End Patch"})
		_, err = ApplyPatch{}.Run(context.Background(), env, in)
		patchStepHook = nil
		root.Close()
		if ClassOf(err) != ClassExecution {
			t.Fatalf("fail at %d: err = %v", failAt, err)
		}
		got := map[string]string{}
		_ = filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
			rel, _ := filepath.Rel(ws, p)
			if err == nil && rel != "." {
				b, _ := os.ReadFile(p)
				got[filepath.ToSlash(rel)] = string(b)
				if !d.IsDir() {
					if st, _ := d.Info(); st.Mode().Perm() != 0o640 {
						t.Errorf("fail at %d: %s mode %v", failAt, rel, st.Mode().Perm())
					}
				}
			}
			return nil
		})
		want := map[string]string{"m.txt": "m1\nm2\n", "d.txt": "delete me\n", "from.txt": "move me\n", "to.txt": "overwritten\n"}
		if len(got) != len(want) {
			t.Errorf("fail at %d: workspace holds %v", failAt, got)
		}
		for p, c := range want {
			if got[p] != c {
				t.Errorf("fail at %d: %s = %q, want %q", failAt, p, got[p], c)
			}
		}
	}
}
